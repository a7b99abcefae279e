package board

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"devhost/host/api"
)

// CentralPath is the control channel's simulated BLE central:
//
//	POST /ble/central  CentralOp → CentralResult
//
// op is connect, mtu, discover, read, write, execute, subscribe (enable: commit),
// notifications or disconnect. An ATT error is an
// outcome of the operation (200 with att_error), not a failure of the control channel; an
// unknown connection is 404, no peripheral 409, a malformed op 400.
const CentralPath = "/ble/central"

// CentralOp is one operation of the simulated central.
type CentralOp struct {
	Op      string `json:"op"`
	Conn    int    `json:"conn,omitempty"`
	MTU     int    `json:"mtu,omitempty"`
	Handle  uint16 `json:"handle,omitempty"`
	Offset  int    `json:"offset,omitempty"`
	Data    []byte `json:"data,omitempty"` // base64 in JSON
	Prepare bool   `json:"prepare,omitempty"`
	Commit  bool   `json:"commit,omitempty"`
}

// CentralResult is its answer.
type CentralResult struct {
	Conn     int            `json:"conn,omitempty"`
	MTU      int            `json:"mtu,omitempty"`
	Services []ServiceInfo  `json:"services,omitempty"`
	Value    []byte         `json:"value,omitempty"`
	Notes    []Notification `json:"notifications,omitempty"`
	ATTError int            `json:"att_error,omitempty"`
}

// Central runs one operation.
func (s *Sim) Central(op CentralOp) (CentralResult, error) {
	var res CentralResult
	var err error
	switch op.Op {
	case "connect":
		res.Conn, err = s.CentralConnect()
	case "mtu":
		res.MTU, err = s.CentralMTU(op.Conn, op.MTU)
	case "discover":
		res.Services, err = s.CentralDiscover(op.Conn)
	case "read":
		res.Value, err = s.CentralRead(op.Conn, op.Handle, op.Offset)
	case "write":
		err = s.CentralWrite(op.Conn, op.Handle, op.Offset, op.Data, op.Prepare)
	case "execute":
		err = s.CentralExecute(op.Conn, op.Commit)
	case "subscribe":
		err = s.CentralSubscribe(op.Conn, op.Handle, op.Commit)
	case "notifications":
		res.Notes, err = s.CentralNotifications(op.Conn)
	case "disconnect":
		err = s.CentralDisconnect(op.Conn)
	default:
		return res, fmt.Errorf("board: unknown central op %q", op.Op)
	}
	var ae *ATTError
	if errors.As(err, &ae) {
		res.ATTError = ae.Code
		return res, nil
	}
	return res, err
}

// serveCentral answers POST /ble/central.
func (s *Sim) serveCentral(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteErr(w, api.Errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "%s wants POST", CentralPath))
		return
	}
	var op CentralOp
	if err := decodeBody(r, &op); err != nil {
		api.WriteErr(w, err)
		return
	}
	res, err := s.Central(op)
	switch {
	case errors.Is(err, ErrNoConnection):
		api.WriteErr(w, api.Errorf(http.StatusNotFound, api.CodeNotFound, "%v", err))
	case errors.Is(err, ErrNoPeripheral):
		api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err))
	case err != nil:
		api.WriteErr(w, api.Validation("", "%v", err))
	default:
		api.WriteJSON(w, http.StatusOK, res)
	}
}

// Central runs one operation of the simulated central through the control channel.
func (c *Client) Central(ctx context.Context, op CentralOp) (CentralResult, error) {
	var res CentralResult
	if err := c.exchange(ctx, http.MethodPost, CentralPath, op, &res, "central answer"); err != nil {
		return CentralResult{}, err
	}
	return res, nil
}
