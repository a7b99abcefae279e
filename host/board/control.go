package board

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"devhost/host/api"
)

// maxControlBody caps a control request body; every request is a few numbers.
const maxControlBody = 4 << 10

// maxSocketPath is the longest path a unix socket address can hold on Linux (sun_path less
// its terminating NUL).
const maxSocketPath = 107

// Listen opens the control channel's unix socket. A stale socket file left by a power cut is
// removed first; a socket another process still answers on, or a path that is not a socket,
// is an error. The socket is owner-only because it can press the presence button. Opening it
// before the device announces itself means a test that saw the listening line can drive the
// board at once.
func Listen(socketPath string) (net.Listener, error) {
	if len(socketPath) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %q is %d bytes; unix sockets allow %d", socketPath, len(socketPath), maxSocketPath)
	}
	if err := removeStaleSocket(socketPath); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The listener removes the socket file when closed.
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(socketPath, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// Serve runs the control channel on a unix socket (see Listen) until ctx ends, then removes
// the socket.
func (s *Sim) Serve(ctx context.Context, socketPath string) error {
	ln, err := Listen(socketPath)
	if err != nil {
		return err
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener runs the control channel on ln until ctx ends, and closes ln.
func (s *Sim) ServeListener(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("control channel: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-errc
	return nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("control socket %s: exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another process is serving on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale control socket: %w", err)
	}
	return nil
}

// Handler is the control channel's HTTP API:
//
//	GET  /state       the State document
//	PUT  /memory      MemoryUpdate
//	PUT  /eth         IfUpdate {"up"?, "ip"?, "netmask"?, "gateway"?}: the Ethernet interface
//	PUT  /thread      IfUpdate: the Thread interface
//	POST /wifi/ap     APUpdate: an access point comes in range (or is replaced, same BSSID)
//	POST /wifi/ap/remove  {"ssid"}: every AP with the SSID goes out of range
//	PUT  /wifi/ap/fault   {"ssid", "fault"}: the behaviour of every AP with the SSID
//	PUT  /wifi/scan-busy  {"busy": bool}
//	POST /net/down    Ethernet down (kept from the single-link board)
//	POST /net/up      Ethernet up
//	PUT  /net/route   {"ip"?, "netmask"?, "gateway"?}: the Ethernet address
//	POST /button      {"seconds": N}: a presence event (N defaults to 600)
//	PUT  /gpio        PinUpdate {"pin": N, "high"?: bool, "fault"?: bool}
//	POST /can         CANFrame {"id", "ext"?, "rtr"?, "data": base64}: a frame from the bus
//	POST /ble/advert  BLEAdvert {"addr", "rssi", "data": base64}: an advert on the air
//	POST /ble/central CentralOp: the simulated BLE central (central.go; answers CentralResult)
//
// Every answer is the State document after the change, or the device's JSON error body
// (400 `validation` for bad input, 404 `not_found`, 405 `method_not_allowed`).
func (s *Sim) Handler() http.Handler {
	type route struct {
		method string
		fn     func(*http.Request) error
	}
	routes := map[string]route{
		"/state":          {http.MethodGet, func(*http.Request) error { return nil }},
		"/memory":         {http.MethodPut, withBody(s.putMemory)},
		"/eth":            {http.MethodPut, withBody(s.putIface(IfaceEth))},
		"/thread":         {http.MethodPut, withBody(s.putIface(IfaceThread))},
		"/wifi/ap":        {http.MethodPost, withBody(s.postAP)},
		"/wifi/ap/remove": {http.MethodPost, withBody(s.postAPRemove)},
		"/wifi/ap/fault":  {http.MethodPut, withBody(s.putAPFault)},
		"/wifi/scan-busy": {http.MethodPut, withBody(s.putScanBusy)},
		"/net/down":       {http.MethodPost, func(*http.Request) error { return s.setEthUp(false) }},
		"/net/up":         {http.MethodPost, func(*http.Request) error { return s.setEthUp(true) }},
		"/net/route":      {http.MethodPut, withBody(s.putRoute)},
		"/button":         {http.MethodPost, withBody(s.postButton)},
		"/gpio":           {http.MethodPut, withBody(s.putGPIO)},
		"/can":            {http.MethodPost, withBody(s.InjectCAN)},
		"/ble/advert":     {http.MethodPost, withBody(s.InjectAdvert)},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == CentralPath {
			s.serveCentral(w, r) // the simulated BLE central answers results, not the state (central.go)
			return
		}
		rt, ok := routes[r.URL.Path]
		if !ok {
			api.WriteErr(w, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no control endpoint %s", r.URL.Path))
			return
		}
		if r.Method != rt.method {
			w.Header().Set("Allow", rt.method)
			api.WriteErr(w, api.Errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, "%s wants %s", r.URL.Path, rt.method))
			return
		}
		if err := rt.fn(r); err != nil {
			api.WriteErr(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, s.State())
	})
}

// decodeBody decodes a control request strictly. An empty body is an empty update.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxControlBody+1))
	if err != nil {
		return api.Errorf(http.StatusBadRequest, api.CodeBadRequest, "read body: %v", err)
	}
	if len(b) > maxControlBody {
		return api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body over %d bytes", maxControlBody)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := decodeStrict(b, v); err != nil {
		return api.Validation("", "%v", err)
	}
	return nil
}

// withBody decodes the request body into a T and hands it to apply, so that an endpoint is
// only what it does with its body.
func withBody[T any](apply func(T) error) func(*http.Request) error {
	return func(r *http.Request) error {
		var v T
		if err := decodeBody(r, &v); err != nil {
			return err
		}
		return apply(v)
	}
}

// invalid answers err as a 400 validation error at path; nil stays nil.
func invalid(path string, err error) error {
	if err == nil {
		return nil
	}
	return api.Validation(path, "%v", err)
}

func (s *Sim) putMemory(u MemoryUpdate) error {
	_, err := s.SetMemory(u)
	return invalid("", err)
}

func (s *Sim) putIface(name string) func(IfUpdate) error {
	return func(u IfUpdate) error {
		_, err := s.SetIface(name, u)
		return invalid(name, err)
	}
}

func (s *Sim) setEthUp(up bool) error {
	_, err := s.SetIface(IfaceEth, IfUpdate{Up: &up})
	return err
}

// RouteUpdate is the single-link board's route move, kept as the Ethernet address.
type RouteUpdate struct {
	IP      *string `json:"ip,omitempty"`
	Netmask *string `json:"netmask,omitempty"`
	Gateway *string `json:"gateway,omitempty"`
}

func (s *Sim) putRoute(u RouteUpdate) error {
	_, err := s.SetIface(IfaceEth, IfUpdate{IP: u.IP, Netmask: u.Netmask, Gateway: u.Gateway})
	return invalid("eth", err)
}

func (s *Sim) postAP(u APUpdate) error {
	_, err := s.AddAP(u)
	return invalid("ap", err)
}

// APFault names access points by SSID and, for a fault change, the behaviour.
type APFault struct {
	SSID  string `json:"ssid"`
	Fault string `json:"fault,omitempty"`
}

func (s *Sim) postAPRemove(u APFault) error {
	if u.Fault != "" {
		return api.Validation("fault", "fault: not part of a removal")
	}
	if err := s.RemoveAP(u.SSID); err != nil {
		return api.Errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	}
	return nil
}

func (s *Sim) putAPFault(u APFault) error {
	if err := s.SetFault(u.SSID, u.Fault); err != nil {
		if strings.HasPrefix(err.Error(), "fault") {
			return api.Validation("fault", "%v", err)
		}
		return api.Errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	}
	return nil
}

// ScanBusy switches the radio's busy state.
type ScanBusy struct {
	Busy *bool `json:"busy"`
}

func (s *Sim) putScanBusy(u ScanBusy) error {
	if u.Busy == nil {
		return api.Validation("busy", "busy: want true or false")
	}
	s.SetScanBusy(*u.Busy)
	return nil
}

type buttonRequest struct {
	Seconds int `json:"seconds"`
}

func (s *Sim) postButton(b buttonRequest) error {
	return invalid("seconds", s.Press(b.Seconds))
}

// Client drives a simulated board's control channel.
type Client struct {
	socket string
	hc     *http.Client
}

// Dial returns a client for the control channel at socketPath. It connects per request, so a
// device that restarts between two calls is fine.
func Dial(socketPath string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: socketPath, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// ControlError is an error answer of the control channel.
type ControlError struct {
	Status  int
	Code    string
	Message string
}

func (e *ControlError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("board: %s (%d %s)", e.Message, e.Status, e.Code)
	}
	return fmt.Sprintf("board: %d %s", e.Status, e.Code)
}

// State reads the whole board.
func (c *Client) State(ctx context.Context) (State, error) {
	return c.do(ctx, http.MethodGet, "/state", nil)
}

// SetMemory changes the heap figures.
func (c *Client) SetMemory(ctx context.Context, u MemoryUpdate) (State, error) {
	return c.do(ctx, http.MethodPut, "/memory", u)
}

// NetUp brings Ethernet up (the single-link board's "net up").
func (c *Client) NetUp(ctx context.Context) (State, error) {
	return c.do(ctx, http.MethodPost, "/net/up", nil)
}

// NetDown takes Ethernet down.
func (c *Client) NetDown(ctx context.Context) (State, error) {
	return c.do(ctx, http.MethodPost, "/net/down", nil)
}

// SetRoute changes the Ethernet address.
func (c *Client) SetRoute(ctx context.Context, u RouteUpdate) (State, error) {
	return c.do(ctx, http.MethodPut, "/net/route", u)
}

// SetIface changes the Ethernet (eth) or Thread (thread) interface.
func (c *Client) SetIface(ctx context.Context, name string, u IfUpdate) (State, error) {
	return c.do(ctx, http.MethodPut, "/"+name, u)
}

// AddAP brings an access point in range.
func (c *Client) AddAP(ctx context.Context, u APUpdate) (State, error) {
	return c.do(ctx, http.MethodPost, "/wifi/ap", u)
}

// RemoveAP takes every access point with the SSID out of range.
func (c *Client) RemoveAP(ctx context.Context, ssid string) (State, error) {
	return c.do(ctx, http.MethodPost, "/wifi/ap/remove", APFault{SSID: ssid})
}

// SetFault sets the behaviour of every access point with the SSID.
func (c *Client) SetFault(ctx context.Context, ssid, fault string) (State, error) {
	return c.do(ctx, http.MethodPut, "/wifi/ap/fault", APFault{SSID: ssid, Fault: fault})
}

// SetScanBusy makes the radio refuse scans or accept them.
func (c *Client) SetScanBusy(ctx context.Context, busy bool) (State, error) {
	return c.do(ctx, http.MethodPut, "/wifi/scan-busy", ScanBusy{Busy: &busy})
}

// Button presses the presence button for a window of seconds (0: the default window).
func (c *Client) Button(ctx context.Context, seconds int) (State, error) {
	return c.do(ctx, http.MethodPost, "/button", buttonRequest{Seconds: seconds})
}

func (c *Client) do(ctx context.Context, method, path string, body any) (State, error) {
	var st State
	if err := c.exchange(ctx, method, path, body, &st, "state"); err != nil {
		return State{}, err
	}
	return st, nil
}

// exchange sends body (when not nil) as JSON to path on the control channel and decodes the
// answer into out; what names the answer in the error when it does not decode. A status other
// than 200 is a *ControlError with the channel's error body.
func (c *Client) exchange(ctx context.Context, method, path string, body, out any, what string) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("board: encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://board"+path, rd)
	if err != nil {
		return fmt.Errorf("board: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("board control channel %s (is the device running?): %w", c.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("board: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(b, &e)
		return &ControlError{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("board: decode %s: %w", what, err)
	}
	return nil
}
