// Package gattprov is protocomm's BLE transport as ESP-IDF's protocomm_ble lays it out:
// one primary service, one characteristic per endpoint, each named by its user description
// (0x2901) — the phone apps look the endpoints up by those names. A request is written to
// the endpoint's characteristic (a long write when it exceeds the MTU) and its answer read
// back from the same characteristic (a long read). The security session belongs to the BLE
// connection and ends with it.
package gattprov

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"devhost/plugins/ble/protocomm"
)

// ServiceUUID is ESP-IDF's default provisioning service UUID.
const ServiceUUID = "021a9004-0382-4aea-bff4-6b3f1c5adfb4"

// EndpointUUIDs are the 16-bit ids ESP-IDF's provisioning manager gives the endpoints; the
// characteristic's 128-bit UUID is the service UUID with these in its bytes 12-13.
var EndpointUUIDs = map[string]uint16{
	protocomm.EPCtrl:    0xff4f,
	protocomm.EPScan:    0xff50,
	protocomm.EPSession: 0xff51,
	protocomm.EPConfig:  0xff52,
	protocomm.EPVersion: 0xff53,
}

// CharUUID is an endpoint's characteristic UUID.
func CharUUID(ep string) string {
	return fmt.Sprintf("%s%04x%s", ServiceUUID[:4], EndpointUUIDs[ep], ServiceUUID[8:])
}

// AdvertData is the advertising data: flags (LE general discoverable, no BR/EDR) and the
// complete local name, the service name the apps list.
func AdvertData(name string) []byte {
	if len(name) > 26 {
		name = name[:26] // 31 bytes of advertising data in all
	}
	return append([]byte{0x02, 0x01, 0x06, byte(len(name) + 1), 0x09}, name...)
}

// AdvertServiceData is the advertising data as ESP-IDF's protocomm_ble lays it out: flags
// and the complete list of 128-bit service UUIDs (the provisioning service, its bytes in
// little-endian order); the name goes in the scan response (ScanResponseData).
func AdvertServiceData() []byte {
	hexDigits := strings.ReplaceAll(ServiceUUID, "-", "")
	out := []byte{0x02, 0x01, 0x06, 0x11, 0x07}
	for i := len(hexDigits) - 2; i >= 0; i -= 2 {
		v, _ := strconv.ParseUint(hexDigits[i:i+2], 16, 8)
		out = append(out, byte(v))
	}
	return out
}

// ScanResponseData is the scan response: the complete local name, the service name the
// apps list.
func ScanResponseData(name string) []byte {
	if len(name) > 29 {
		name = name[:29] // 31 bytes in all
	}
	return append([]byte{byte(len(name) + 1), 0x09}, name...)
}

// ErrNoAnswer is a read before any request on that endpoint.
var ErrNoAnswer = errors.New("gattprov: no answer to read (write the request first)")

// Transport keeps the sessions of the connected centrals.
type Transport struct {
	// Handler is the running provisioning's handler; nil while provisioning is not active.
	Handler func() *protocomm.Handler
	// Gone is told when a central disconnects (the flow's ClientGone); nil for none.
	Gone func()

	mu    sync.Mutex
	conns map[int]*conn
}

type conn struct {
	mu      sync.Mutex
	owner   *protocomm.Handler
	session *protocomm.Session
	answers map[string][]byte
}

func (t *Transport) conn(id int, h *protocomm.Handler) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns == nil {
		t.conns = map[int]*conn{}
	}
	c := t.conns[id]
	if c == nil || c.owner != h {
		c = &conn{owner: h, session: h.NewSession(), answers: map[string][]byte{}}
		t.conns[id] = c
	}
	return c
}

// Write handles one request written to an endpoint's characteristic; an error is the
// protocol's refusal (the GATT layer answers it with an ATT error).
func (t *Transport) Write(id int, ep string, req []byte) error {
	h := t.Handler()
	if h == nil {
		return fmt.Errorf("gattprov: %w", errInactive)
	}
	c := t.conn(id, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.answers, ep)
	out, err := h.Handle(c.session, ep, req)
	if err != nil {
		return err
	}
	c.answers[ep] = out
	return nil
}

var errInactive = errors.New("provisioning is not active")

// Read returns the answer to the last request written to ep on this connection.
func (t *Transport) Read(id int, ep string) ([]byte, error) {
	h := t.Handler()
	if h == nil {
		return nil, fmt.Errorf("gattprov: %w", errInactive)
	}
	c := t.conn(id, h)
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.answers[ep]
	if !ok {
		return nil, ErrNoAnswer
	}
	return out, nil
}

// Disconnected ends the connection's session.
func (t *Transport) Disconnected(id int) {
	t.mu.Lock()
	_, had := t.conns[id]
	delete(t.conns, id)
	t.mu.Unlock()
	if had && t.Gone != nil {
		t.Gone()
	}
}

// Sessions is the number of connections holding a session.
func (t *Transport) Sessions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}
