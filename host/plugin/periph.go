package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"devhost/abi"
)

// The host functions of ABI minor 2, for a provisioning plugin: the GATT server role on the
// board's BLE peripheral (gatt_serve, gatt_reply, gatt_notify, ble_scan_response), routes at
// the root of the setup portal's listener (portal_serve, portal_reply), the WiFi hand-off
// (wifi_provision, wifi_status, wifi_watch, wifi_scan, portal_hold), the proof of
// possession (prov_pop) and the provisioning button (button_watch).
//
// GATT reads and writes and portal exchanges are requests the board or the listener waits
// on: like an HTTP request to a manifest route, each is delivered as an event with an id and
// answered by the plugin's reply in the call that delivered it; unanswered, the host answers
// failure (ATT "unlikely error", HTTP 500). Long (prepared) writes are assembled by the host:
// the plugin gets the whole value once the central executes them.

// PeripheralService is the plugin's GATT service as the board serves it. The callbacks
// never block for long: a read or a write waits for the plugin's answer (at most
// maxHTTPWait).
type PeripheralService struct {
	abi.GATTService
	Connected    func(conn int)
	MTU          func(conn, mtu int)
	Disconnected func(conn int)
	// Read answers a read of characteristic char; Write takes a (whole) written value. An
	// ATTError chooses the ATT error code the central gets.
	Read  func(conn, char int) ([]byte, error)
	Write func(conn, char int, value []byte) error
}

// ATTError is an ATT error code a plugin answered a read or a write with.
type ATTError uint8

func (e ATTError) Error() string { return fmt.Sprintf("ATT error %#02x", uint8(e)) }

// attUnlikely is the ATT error for a request the plugin did not answer.
const attUnlikely ATTError = 0x0e

// Peripheral is the board's BLE peripheral role.
type Peripheral interface {
	// Serve publishes the service table (nil withdraws it, disconnecting the centrals).
	Serve(svc *PeripheralService) error
	// Notify sends a value of characteristic char to the subscribed centrals; it answers how
	// many got it.
	Notify(char int, value []byte) (int, error)
	// ScanResponse sets the scan response data (≤ 31 bytes; empty clears it).
	ScanResponse(data []byte) error
}

// WiFi is the station manager as a provisioning plugin drives it.
type WiFi interface {
	// Provision stores credentials into WiFi slot 0; the station reacts to the change.
	Provision(ssid, passphrase string) error
	Status() abi.WiFiStatus
	// Watch calls fn on every change of the station's state until cancel.
	Watch(fn func(abi.WiFiStatus)) (cancel func())
	Scan() ([]abi.WiFiAP, error)
	// HoldPortal keeps the setup portal up while held (by plugin id), even once the station
	// connects; releasing lets the station manager's decision stand again.
	HoldPortal(id string, on bool)
}

// Button is the board's provisioning button.
type Button interface {
	// Watch calls fn with the window (seconds) of every press until cancel.
	Watch(fn func(seconds int)) (cancel func())
}

// waitReq is a GATT or portal request waiting for the plugin's reply.
type waitReq struct {
	id    uint32
	kind  abi.EventKind
	reply chan any // buffered 1: abi.GATTReply, abi.PortalResponse, or nil when unanswered
}

// periphSession is what one instance set up through the minor-2 functions.
type periphSession struct {
	open          map[uint32]*waitReq // requests delivered in the call in progress
	wifiCancel    func()
	btnCancel     func()
	portalRelease func() // the portal hold's release; nil when not held
	servesGATT    bool
	portalPaths   []string
}

// periphOwners is which instance holds the device-wide resources: the one GATT table and
// each portal path.
type periphOwners struct {
	mu     sync.Mutex
	gatt   *session
	portal map[string]*session
}

var (
	errNoAnswer  = errors.New("the plugin did not answer")
	errNotTaking = errors.New("the plugin is not taking requests")
)

// rcOf is a host function's result for a device call's error: 0 for none, else errno.
func rcOf(err error, def abi.Errno) int32 {
	if err == nil {
		return 0
	}
	return int32(errno(err, def))
}

// request hands a request to the instance of generation gen and waits for its reply.
func (p *plugin) request(ctx context.Context, gen uint64, kind abi.EventKind, payload func(id uint32) []byte) (any, error) {
	req := &waitReq{id: p.nextHTTP.Add(1), kind: kind, reply: make(chan any, 1)}
	if !p.inbox.push(gen, queued{kind: kind, payload: payload(req.id), req: req}) {
		return nil, errNotTaking
	}
	select {
	case r := <-req.reply:
		if r == nil {
			return nil, errNoAnswer
		}
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("plugin request: %w", ctx.Err())
	case <-p.m.clk.After(maxHTTPWait):
		return nil, errNoAnswer
	}
}

// answer completes a request delivered in the call in progress.
func (s *session) answer(kind abi.EventKind, id uint32, v any) int32 {
	r := s.periph.open[id]
	if r == nil || r.kind != kind {
		return int32(abi.ErrNotFound)
	}
	delete(s.periph.open, id)
	r.reply <- v
	return 0
}

// finishPeriph fails the requests the call left unanswered.
func (s *session) finishPeriph() {
	for id, r := range s.periph.open {
		select {
		case r.reply <- nil:
		default:
		}
		delete(s.periph.open, id)
	}
}

// endPeriph releases what the instance held: the GATT table, the portal paths, the watches
// and the portal hold.
func (s *session) endPeriph() {
	m, ps := s.p.m, &s.periph
	if ps.servesGATT {
		m.owners.mu.Lock()
		if m.owners.gatt == s {
			m.owners.gatt = nil
		}
		m.owners.mu.Unlock()
		if err := m.opts.Peripheral.Serve(nil); err != nil {
			s.p.log.Warn("GATT service not withdrawn", "err", err)
		}
		ps.servesGATT = false
	}
	s.setPortalPaths(nil)
	release(&ps.wifiCancel, &ps.btnCancel, &ps.portalRelease)
	s.finishPeriph()
}

func fnGATTServe(s *session, st []uint64) int32 {
	b, e := s.mem(p32(st, 0), p32(st, 1))
	if e != 0 {
		return int32(e)
	}
	pr := s.p.m.opts.Peripheral
	if pr == nil {
		return int32(abi.ErrUnavailable)
	}
	o := &s.p.m.owners
	if len(b) == 0 {
		if !s.periph.servesGATT {
			return 0
		}
		o.mu.Lock()
		o.gatt = nil
		o.mu.Unlock()
		s.periph.servesGATT = false
		return rcOf(pr.Serve(nil), abi.ErrIO)
	}
	svc, err := abi.DecodeGATTService(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	o.mu.Lock()
	if o.gatt != nil && o.gatt != s {
		o.mu.Unlock()
		return int32(abi.ErrConflict)
	}
	o.gatt = s
	o.mu.Unlock()
	s.periph.servesGATT = true
	return rcOf(pr.Serve(s.peripheralService(svc)), abi.ErrIO)
}

// peripheralService turns the plugin's service into the board's, its callbacks feeding this
// instance's inbox.
func (s *session) peripheralService(svc abi.GATTService) *PeripheralService {
	p, gen := s.p, s.gen
	notice := func(op abi.GATTOp, conn, mtu int) {
		p.inbox.push(gen, queued{kind: abi.EvGATT, payload: abi.AppendGATTEvent(nil,
			abi.GATTEvent{Op: op, Conn: uint32(conn), MTU: uint32(mtu)})})
	}
	exchange := func(op abi.GATTOp, conn, char int, v []byte) ([]byte, error) {
		r, err := p.request(context.Background(), gen, abi.EvGATT, func(id uint32) []byte {
			return abi.AppendGATTEvent(nil, abi.GATTEvent{ID: id, Op: op, Conn: uint32(conn), Char: uint32(char), Value: v})
		})
		if err != nil {
			return nil, attUnlikely
		}
		rep := r.(abi.GATTReply)
		if rep.ATT != 0 {
			return nil, ATTError(rep.ATT)
		}
		return rep.Value, nil
	}
	return &PeripheralService{GATTService: svc,
		Connected:    func(conn int) { notice(abi.GATTConnect, conn, 0) },
		MTU:          func(conn, mtu int) { notice(abi.GATTMTU, conn, mtu) },
		Disconnected: func(conn int) { notice(abi.GATTDisconnect, conn, 0) },
		Read:         func(conn, char int) ([]byte, error) { return exchange(abi.GATTRead, conn, char, nil) },
		Write: func(conn, char int, v []byte) error {
			if len(v) > abi.MaxGATTValue {
				return ATTError(0x0d) // invalid attribute value length
			}
			_, err := exchange(abi.GATTWrite, conn, char, v)
			return err
		},
	}
}

// replyFunc is the body of gatt_reply or portal_reply: it completes a request of kind.
func replyFunc[T any](kind abi.EventKind, decode func([]byte) (T, error), id func(T) uint32) hostFunc {
	return func(s *session, st []uint64) int32 {
		v, rc := decodeArg(s, st, decode)
		if rc != 0 {
			return rc
		}
		return s.answer(kind, id(v), v)
	}
}

func fnGATTNotify(s *session, st []uint64) int32 {
	n, rc := decodeArg(s, st, abi.DecodeGATTNotification)
	if rc != 0 {
		return rc
	}
	if !s.periph.servesGATT {
		return int32(abi.ErrState)
	}
	got, err := s.p.m.opts.Peripheral.Notify(int(n.Char), n.Value)
	if err != nil {
		return int32(errno(err, abi.ErrInvalid))
	}
	return int32(got)
}

func fnBLEScanResponse(s *session, st []uint64) int32 {
	pr := s.p.m.opts.Peripheral
	if pr == nil {
		return int32(abi.ErrUnavailable)
	}
	b, rc := advertArg(s, st)
	if rc == 0 {
		rc = rcOf(pr.ScanResponse(b), abi.ErrIO)
	}
	return rc
}

func fnPortalServe(s *session, st []uint64) int32 {
	paths, rc := decodeArg(s, st, abi.DecodePortalPaths)
	if rc != 0 {
		return rc
	}
	o := &s.p.m.owners
	o.mu.Lock()
	for _, path := range paths {
		if h := o.portal[path]; h != nil && h != s {
			o.mu.Unlock()
			return int32(abi.ErrConflict)
		}
	}
	o.mu.Unlock()
	s.setPortalPaths(paths)
	return 0
}

// setPortalPaths makes paths the instance's portal routes, releasing the others it had.
func (s *session) setPortalPaths(paths []string) {
	o := &s.p.m.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, path := range s.periph.portalPaths {
		if o.portal[path] == s {
			delete(o.portal, path)
		}
	}
	if o.portal == nil {
		o.portal = map[string]*session{}
	}
	for _, path := range paths {
		o.portal[path] = s
	}
	s.periph.portalPaths = paths
}

// ServePortal serves a request at the root of the setup portal's listener when a plugin
// serves its path (portal_serve); it reports false, writing nothing, otherwise. The device
// calls it for requests that came in on the portal network only. The request's body is
// passed raw and its connection (remote address and port) and Cookie header with it; none of
// the API's content-type, authentication or Origin rules apply.
func (m *Manager) ServePortal(w http.ResponseWriter, r *http.Request) bool {
	m.owners.mu.Lock()
	s := m.owners.portal[r.URL.Path]
	m.owners.mu.Unlock()
	if s == nil {
		return false
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, abi.MaxPortalBody))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return true
	}
	res, err := s.p.request(r.Context(), s.gen, abi.EvPortal, func(id uint32) []byte {
		return abi.AppendPortalRequest(nil, abi.PortalRequest{ID: id, Method: r.Method, Path: r.URL.Path,
			Conn: r.RemoteAddr, Cookie: r.Header.Get("Cookie"), Body: body})
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return true
	}
	resp := res.(abi.PortalResponse)
	ct := resp.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	if resp.SetCookie != "" {
		w.Header().Set("Set-Cookie", resp.SetCookie)
	}
	w.WriteHeader(int(resp.Status))
	_, _ = w.Write(resp.Body)
	return true
}

func fnWiFiProvision(s *session, st []uint64) int32 {
	w := s.p.m.opts.WiFi
	if w == nil {
		return int32(abi.ErrUnavailable)
	}
	c, rc := decodeArg(s, st, abi.DecodeWiFiCredentials)
	if rc != 0 {
		return rc
	}
	if err := w.Provision(c.SSID, c.Passphrase); err != nil {
		s.p.log.Warn("wifi credentials refused", "err", err)
		return int32(errno(err, abi.ErrInvalid))
	}
	return 0
}

// putJSON answers a read function with v as JSON.
func (s *session) putJSON(st []uint64, v any) int32 {
	out, err := json.Marshal(v)
	if err != nil {
		return int32(abi.ErrInternal)
	}
	return s.put(p32(st, 0), p32(st, 1), out)
}

func fnWiFiStatus(s *session, st []uint64) int32 {
	w := s.p.m.opts.WiFi
	if w == nil {
		return int32(abi.ErrUnavailable)
	}
	return s.putJSON(st, w.Status())
}

func fnWiFiWatch(s *session, st []uint64) int32 {
	w := s.p.m.opts.WiFi
	gen, in := s.gen, s.p.inbox
	return toggleWatch(st, w != nil, &s.periph.wifiCancel, func() (func(), error) {
		return w.Watch(func(st abi.WiFiStatus) {
			if b, err := json.Marshal(st); err == nil {
				in.push(gen, queued{kind: abi.EvWiFi, payload: b})
			}
		}), nil
	})
}

// toggleWatch is the body of a function that turns something on (argument 1) or off (0):
// start turns it on and returns how to turn it off, kept in *cancel (an error of start is
// ErrIO unless it wraps an abi.Errno); available false is a device without it.
func toggleWatch(st []uint64, available bool, cancel *func(), start func() (func(), error)) int32 {
	on := p32(st, 0)
	switch {
	case on > 1:
		return int32(abi.ErrInvalid)
	case !available:
		return int32(abi.ErrUnavailable)
	case on == 0:
		release(cancel)
	case on == 1 && *cancel == nil:
		c, err := start()
		if err != nil {
			return int32(errno(err, abi.ErrIO))
		}
		*cancel = c
	}
	return 0
}

func fnWiFiScan(s *session, st []uint64) int32 {
	w := s.p.m.opts.WiFi
	if w == nil {
		return int32(abi.ErrUnavailable)
	}
	aps, err := w.Scan()
	if err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	if aps == nil {
		aps = []abi.WiFiAP{}
	}
	return s.putJSON(st, aps)
}

func fnPortalHold(s *session, st []uint64) int32 {
	w, id := s.p.m.opts.WiFi, s.p.id
	return toggleWatch(st, w != nil, &s.periph.portalRelease, func() (func(), error) {
		w.HoldPortal(id, true)
		return func() { w.HoldPortal(id, false) }, nil
	})
}

func fnProvPoP(s *session, st []uint64) int32 {
	pop := s.p.m.opts.PoP
	if pop == nil {
		return int32(abi.ErrUnavailable)
	}
	v, err := pop()
	if err != nil {
		return int32(errno(err, abi.ErrInternal))
	}
	return s.put(p32(st, 0), p32(st, 1), []byte(v))
}

func fnButtonWatch(s *session, st []uint64) int32 {
	bt := s.p.m.opts.Button
	gen, in := s.gen, s.p.inbox
	return toggleWatch(st, bt != nil, &s.periph.btnCancel, func() (func(), error) {
		if c := s.p.takeButtonCarry(); c != nil {
			// The watch that was to wake this instance: presses during its start included.
			return c, nil
		}
		return bt.Watch(func(seconds int) {
			in.push(gen, queued{kind: abi.EvButton, payload: abi.AppendTimer(nil, uint32(max(seconds, 0)))})
		}), nil
	})
}

// periphFunctions are the minor-2 host functions, for hostFunctions.
var periphFunctions = []fnDef{
	{abi.FnGATTServe, fnGATTServe},
	{abi.FnGATTReply, replyFunc(abi.EvGATT, abi.DecodeGATTReply, func(r abi.GATTReply) uint32 { return r.ID })},
	{abi.FnGATTNotify, fnGATTNotify},
	{abi.FnBLEScanResponse, fnBLEScanResponse},
	{abi.FnPortalServe, fnPortalServe},
	{abi.FnPortalReply, replyFunc(abi.EvPortal, abi.DecodePortalResponse, func(r abi.PortalResponse) uint32 { return r.ID })},
	{abi.FnWiFiProvision, fnWiFiProvision},
	{abi.FnWiFiStatus, fnWiFiStatus},
	{abi.FnWiFiWatch, fnWiFiWatch},
	{abi.FnWiFiScan, fnWiFiScan},
	{abi.FnPortalHold, fnPortalHold},
	{abi.FnProvPoP, fnProvPoP},
	{abi.FnButtonWatch, fnButtonWatch},
}
