package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"devhost/abi"
)

// Plugin holds a plugin's handlers. A nil handler ignores its events, except OnPut (a PUT
// without a handler fails) and OnHTTP (a request without a handler answers 404).
type Plugin struct {
	// OnInit runs once when the device starts the plugin: register the namespace, publish
	// the initial state, subscribe, arm timers. An error fails the start.
	OnInit func(info Info) error
	// OnConfig runs when the plugin namespace's effective values changed.
	OnConfig func(cfg Config)
	// OnDelta receives the values of subscribed paths, in arrival order.
	OnDelta func(values []PathValue)
	// OnPut answers an inbound Signal K PUT on a path registered with HandlePuts.
	OnPut func(req PutRequest) PutResult
	// OnPutAnswer receives the answer to an outbound PUT sent with SendPut.
	OnPutAnswer func(ans PutAnswer)
	// OnTimer runs when a timer set with SetTimer fires.
	OnTimer func(id uint32)
	// OnHTTP answers a request for one of the manifest's routes.
	OnHTTP func(req *Request) Response
	// OnGPIO receives an edge of a pin watched with GPIOWatch.
	OnGPIO func(pin int, level bool)
	// OnCAN receives a CAN frame that passed the filters set with CANFilter.
	OnCAN func(f CANFrame)
	// OnBLE receives an advertisement while BLEScan is on.
	OnBLE func(a BLEAdvert)
	// OnNetData receives bytes from a socket opened with NetDial or NetListenUDP; data is
	// valid during the call only (copy what is kept).
	OnNetData func(id uint32, data []byte)
	// OnNetState learns that a socket opened or closed (with the reason).
	OnNetState func(s NetState)
	// OnStop runs before an orderly stop; host calls still work during it.
	OnStop func()

	// OnGATT receives the events of the service served with GATTServe and answers reads
	// and writes (the answer to a notice is ignored); nil answers them ATT "unlikely error".
	OnGATT func(ev abi.GATTEvent) GATTAnswer
	// OnPortal answers a request to a portal path served with PortalServe (nil: 404).
	OnPortal func(req abi.PortalRequest) PortalResponse
	// OnWiFi receives the station's state changes while WiFiWatch is on.
	OnWiFi func(st abi.WiFiStatus)
	// OnButton receives a press of the provisioning button (its window in seconds) while
	// ButtonWatch is on.
	OnButton func(seconds int)
}

// Types shared with the ABI.
type (
	// Info is what the device tells a starting plugin: the host's ABI version, the plugin's
	// id and version, the granted capabilities, the device id and the namespace's values.
	Info = abi.Init
	// PathValue is a value at a Signal K path of vessels.self.
	PathValue = abi.PathValue
	// Value is a Signal K value: null, number, string, bool or JSON.
	Value = abi.Value
	// PutAnswer is the answer to an outbound PUT (State COMPLETED, FAILED or TIMEOUT).
	PutAnswer = abi.PutAnswer
	// CANFrame is a classic CAN frame.
	CANFrame = abi.CANFrame
	// CANFilter passes frames whose ID&Mask equals the filter's ID&Mask.
	CANFilter = abi.CANFilter
	// BLEAdvert is a received BLE advertisement.
	BLEAdvert = abi.BLEAdvert
	// Capability is a permission granted by the operator.
	Capability = abi.Capability
)

// Errors the host answers (see abi.Errno).
const (
	ErrPermission  = abi.ErrPermission
	ErrInvalid     = abi.ErrInvalid
	ErrNotFound    = abi.ErrNotFound
	ErrLimit       = abi.ErrLimit
	ErrState       = abi.ErrState
	ErrConflict    = abi.ErrConflict
	ErrBusy        = abi.ErrBusy
	ErrUnavailable = abi.ErrUnavailable
	ErrIO          = abi.ErrIO
	ErrStopped     = abi.ErrStopped
	ErrInternal    = abi.ErrInternal
)

// rt is the plugin's run-time state: one plugin per module, driven one call at a time.
var rt struct {
	plugin  *Plugin
	info    Info
	started bool
	stopped bool
	buf     []byte      // event_read buffer, reused
	evs     []abi.Event // the records of the batch in hand, over buf; the slice is reused
	pub     []byte      // buffered value records
	pubN    int
	ctxPub  []ctxQueue     // values queued for other contexts (PublishTo)
	srcMsg  []byte         // the sk_publish_src message being put together (flushSources)
	spare   [][]byte       // the buffers of earlier batches' queues (spareBuf)
	replies []abi.PutReply // PUT replies sent after the batch's values
	// canPublish caches the signalk.publish grant: Publish checks it for every value.
	canPublish bool
	paths      [256]string // valid published paths, see checkPath (a gateway publishes hundreds)
	batch      uint64      // batches handled, see Batch
	kept       []byte      // the block keep copies into
	emit       []byte      // the message of the event being sent, reused (see emit)
}

// Batch answers the number of the batch of events being handled: the device calls the
// plugin with a batch of events (everything that came since the last call), the handlers
// run one after the other, and the number grows by one from call to call. Handlers that see
// the same number run within moments of each other, in one call: what one read from the
// device (the clock, for instance) can serve the others, saving a host call each.
func Batch() uint64 { return rt.batch }

// Register installs the plugin's handlers; call it from an init function. A second call
// replaces the first.
func Register(p *Plugin) { rt.plugin = p }

// resetState forgets everything about a previous run (a fake host starting anew).
func resetState() {
	p := rt.plugin
	rt.plugin, rt.info, rt.started, rt.stopped = p, Info{}, false, false
	rt.canPublish, rt.paths = false, [len(rt.paths)]string{}
	rt.pub, rt.pubN, rt.replies, rt.ctxPub = rt.pub[:0], 0, nil, nil
}

// Granted reports whether the operator granted c.
func Granted(c Capability) bool { return abi.HasCapability(rt.info.Capabilities, c) }

// ID is the plugin's id ("" before start).
func ID() string { return rt.info.ID }

func hostErr(what string, rc int32) error {
	if rc >= 0 {
		return nil
	}
	return fmt.Errorf("sdk: %s: %w", what, abi.Errno(rc))
}

// readBatch fetches the current call's batch into the reused buffer.
func readBatch() ([]byte, error) {
	if cap(rt.buf) == 0 {
		rt.buf = make([]byte, 64<<10)
	}
	for {
		n := callEventRead(rt.buf[:cap(rt.buf)])
		if n < 0 {
			return nil, hostErr("event_read", n)
		}
		if int(n) <= cap(rt.buf) {
			return rt.buf[:n], nil
		}
		if n > abi.MaxEventBatch {
			return nil, fmt.Errorf("sdk: batch of %d bytes, at most %d", n, abi.MaxEventBatch)
		}
		rt.buf = make([]byte, n)
	}
}

// dispatch handles one export call: the init batch or an event batch. It returns the
// export's result: 0 handled, 1 failed.
func dispatch(isInit bool) int32 {
	if rt.plugin == nil || rt.stopped || isInit == rt.started {
		return 1
	}
	batch, err := readBatch()
	if err != nil {
		return 1
	}
	rt.batch++
	evs, err := abi.AppendEvents(rt.evs[:0], batch)
	if evs != nil {
		rt.evs = evs
	}
	if err != nil {
		logInternal("event batch: %v", err)
		return 1
	}
	failed := false
	for _, ev := range evs {
		if isInit != (ev.Kind == abi.EvInit) {
			logInternal("unexpected %s event", ev.Kind)
			failed = true
			continue
		}
		if err := handle(ev); err != nil {
			logInternal("%s event: %v", ev.Kind, err)
			failed = true
		}
	}
	endBatch()
	clear(evs) // the slots are kept for the next batch, not the data they point into
	if isInit && !failed {
		rt.started = true
	}
	if failed {
		return 1
	}
	return 0
}

// endBatch sends the buffered values, then the queued PUT replies.
func endBatch() {
	if err := Flush(); err != nil {
		logInternal("%v", err)
	}
	for _, r := range rt.replies {
		if rc := callIn(abi.FnSKPutReply, abi.AppendPutReply(nil, r)); rc < 0 {
			logInternal("put reply %d: %v", r.ID, abi.Errno(rc))
		}
	}
	rt.replies = rt.replies[:0]
}

func handle(ev abi.Event) error {
	p := rt.plugin
	switch ev.Kind {
	case abi.EvInit:
		in, err := abi.UnmarshalInit(ev.Data)
		if err != nil {
			return err
		}
		rt.info = in
		rt.canPublish = abi.HasCapability(in.Capabilities, abi.CapSKPublish)
		if p.OnInit != nil {
			return p.OnInit(in)
		}
	case abi.EvConfig:
		var c Config
		if err := json.Unmarshal(ev.Data, &c); err != nil || c == nil {
			return errors.New("config values are not a JSON object")
		}
		if p.OnConfig != nil {
			p.OnConfig(c)
		}
	case abi.EvDelta:
		vs, err := abi.DecodeValues(ev.Data, abi.MaxEventBatch)
		if err != nil {
			return err
		}
		if p.OnDelta != nil {
			p.OnDelta(vs)
		}
	case abi.EvPut:
		req, err := abi.DecodePutRequest(ev.Data)
		if err != nil {
			return err
		}
		res := Failure("no PUT handler")
		if p.OnPut != nil {
			res = p.OnPut(PutRequest{ID: req.ID, Path: req.Path, Value: req.Value})
		}
		rt.replies = append(rt.replies, abi.PutReply{ID: req.ID, Result: res.Code, Message: res.Message})
	case abi.EvPutAnswer:
		a, err := abi.DecodePutAnswer(ev.Data)
		if err != nil {
			return err
		}
		if p.OnPutAnswer != nil {
			p.OnPutAnswer(a)
		}
	case abi.EvTimer:
		id, err := abi.DecodeTimer(ev.Data)
		if err != nil {
			return err
		}
		if p.OnTimer != nil {
			p.OnTimer(id)
		}
	case abi.EvHTTP:
		h, err := abi.DecodeHTTPRequest(ev.Data)
		if err != nil {
			return err
		}
		return serveHTTP(p, h)
	case abi.EvGPIO:
		e, err := abi.DecodeGPIOEdge(ev.Data)
		if err != nil {
			return err
		}
		if p.OnGPIO != nil {
			p.OnGPIO(int(e.Pin), e.Level == 1)
		}
	case abi.EvCAN:
		f, err := abi.DecodeCANFrame(ev.Data)
		if err != nil {
			return err
		}
		f.Data = keep(f.Data)
		if p.OnCAN != nil {
			p.OnCAN(f)
		}
	case abi.EvBLE:
		a, err := abi.DecodeBLEAdvert(ev.Data)
		if err != nil {
			return err
		}
		a.Data = keep(a.Data)
		if p.OnBLE != nil {
			p.OnBLE(a)
		}
	case abi.EvNetData, abi.EvNetState:
		return handleNet(p, ev)
	case abi.EvGATT, abi.EvPortal, abi.EvWiFi, abi.EvButton:
		return periphEvent(p, ev)
	case abi.EvStop:
		if p.OnStop != nil {
			p.OnStop()
		}
		rt.stopped = true
	}
	return nil
}

// keep copies an event's bytes out of the batch buffer (reused by the next call) for a
// handler that may keep them. The copies share blocks of keepBlock bytes, a block never
// written again once handed out: one allocation per few hundred CAN frames instead of one
// per frame (inside the device an allocation costs about a microsecond). Each copy's
// capacity ends with it, so appending to one never touches another.
func keep(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > keepBlock/4 {
		return append([]byte(nil), b...)
	}
	if cap(rt.kept)-len(rt.kept) < len(b) {
		rt.kept = make([]byte, 0, keepBlock)
	}
	start := len(rt.kept)
	rt.kept = append(rt.kept, b...)
	return rt.kept[start:len(rt.kept):len(rt.kept)]
}

const keepBlock = 4096

func serveHTTP(p *Plugin, h abi.HTTPRequest) error {
	req := &Request{ID: h.ID, Method: h.Method, Route: h.Route, Path: h.Path, RawQuery: h.Query,
		Body: append([]byte(nil), h.Body...)}
	var resp Response
	if p.OnHTTP != nil {
		resp = p.OnHTTP(req)
	} else {
		resp = ErrorResponse(404, "not_found") // encoded only when needed: reflection is slow in the sandbox
	}
	if resp.Status == 0 {
		resp.Status = 200
	}
	out := abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: h.ID, Status: uint32(resp.Status),
		ContentType: resp.ContentType, Body: resp.Body})
	return hostErr("http_reply", callIn(abi.FnHTTPReply, out))
}

// logInternal reports the SDK's own trouble through the plugin's log when it may log.
func logInternal(format string, args ...any) {
	if Granted(abi.CapLog) {
		msg := "sdk: " + fmt.Sprintf(format, args...)
		callLog(int32(LevelError), []byte(truncate(msg, abi.MaxLogLine)))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// Request is an HTTP request for one of the manifest's routes. Paths are relative to /api/v1.
type Request struct {
	ID       uint32
	Method   string
	Route    string // the manifest route that matched, with its :params
	Path     string // the request path
	RawQuery string
	Body     []byte // JSON (the device accepts nothing else on writes)
}

// Param returns the value of the route's :name segment ("" when the route has none).
func (r *Request) Param(name string) string {
	rs, ps := strings.Split(r.Route, "/"), strings.Split(r.Path, "/")
	if len(rs) != len(ps) {
		return ""
	}
	for i, seg := range rs {
		if seg == ":"+name {
			return ps[i]
		}
	}
	return ""
}

// Query parses the query string (a malformed one gives what parses).
func (r *Request) Query() url.Values {
	v, _ := url.ParseQuery(r.RawQuery)
	return v
}

// DecodeJSON decodes the body into v, refusing unknown members and trailing data.
func (r *Request) DecodeJSON(v any) error {
	if err := abi.DecodeStrict(r.Body, v); err != nil {
		return fmt.Errorf("sdk: request body: %w", err)
	}
	return nil
}

// Response answers a Request. An empty ContentType means application/json; Status 0 means 200.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

// JSONResponse encodes v as the body of a response with status.
func JSONResponse(status int, v any) Response {
	b, err := json.Marshal(v)
	if err != nil {
		return ErrorResponse(500, "internal")
	}
	return Response{Status: status, Body: b}
}

// ErrorResponse is the device's error body {"error": code} with status.
func ErrorResponse(status int, code string) Response {
	b, _ := json.Marshal(map[string]string{"error": code})
	return Response{Status: status, Body: b}
}
