package abi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// EventKind is the kind of one record in an event batch.
type EventKind uint8

// Event kinds. A plugin ignores a kind it does not know (a later minor may add kinds).
const (
	EvInit      EventKind = 1  // Init as JSON; the only record of the dev_init batch
	EvConfig    EventKind = 2  // the namespace's effective values as a JSON object
	EvDelta     EventKind = 3  // value records of subscribed paths
	EvPut       EventKind = 4  // PutRequest
	EvPutAnswer EventKind = 5  // PutAnswer
	EvTimer     EventKind = 6  // u32 timer id
	EvHTTP      EventKind = 7  // HTTPRequest
	EvGPIO      EventKind = 8  // GPIOEdge
	EvCAN       EventKind = 9  // CANFrame
	EvBLE       EventKind = 10 // BLEAdvert
	EvStop      EventKind = 11 // empty; the last batch before an orderly stop
	EvNetData   EventKind = 12 // NetData: bytes received on a socket (minor 2)
	EvNetState  EventKind = 13 // NetState: a socket opened or closed (minor 2)
	EvGATT      EventKind = 14 // GATTEvent (minor 2)
	EvPortal    EventKind = 15 // PortalRequest (minor 2)
	EvWiFi      EventKind = 16 // WiFiStatus as JSON (minor 2)
	EvButton    EventKind = 17 // u32 seconds of the press's window (minor 2)
)

var eventNames = [...]string{
	EvInit: "init", EvConfig: "config", EvDelta: "delta", EvPut: "put", EvPutAnswer: "put_answer",
	EvTimer: "timer", EvHTTP: "http", EvGPIO: "gpio", EvCAN: "can", EvBLE: "ble", EvStop: "stop",
	EvNetData: "net_data", EvNetState: "net_state",
	EvGATT: "gatt", EvPortal: "portal", EvWiFi: "wifi", EvButton: "button",
}

func (k EventKind) String() string { return enumName(eventNames[:], uint8(k), "event") }

// enumName is the String of the ABI's small enums: the value's name in names (indexed by
// value), or kind(value) for one the table does not name, since a later minor may add values.
func enumName(names []string, v uint8, kind string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

// Event is one record of a batch: u8 kind, u32 payload length, payload.
type Event struct {
	Kind EventKind
	Data []byte
}

// EventHeader is the size of a record's header.
const EventHeader = 5

// AppendEvent appends one record.
func AppendEvent(b []byte, kind EventKind, payload []byte) []byte {
	b = append(b, byte(kind))
	b = appendBytes(b, payload)
	return b
}

// DecodeEvents splits a batch into records (Data aliases b). Payloads are decoded by kind.
func DecodeEvents(b []byte) ([]Event, error) { return AppendEvents(nil, b) }

// AppendEvents is DecodeEvents appending the records to dst: a plugin that decodes batch
// after batch into one slice (dst[:0]) grows it once, not record by record every batch.
func AppendEvents(dst []Event, b []byte) ([]Event, error) {
	if len(b) > MaxEventBatch {
		return nil, fmt.Errorf("abi: event batch of %d bytes, at most %d", len(b), MaxEventBatch)
	}
	r := reader{b: b}
	out := dst
	for len(r.b) > 0 && r.err == nil {
		k := EventKind(r.u8())
		d := r.bytes(MaxEventBatch, "event")
		if r.err == nil {
			out = append(out, Event{Kind: k, Data: d})
		}
	}
	return done(&r, out)
}

// Init is the payload of EvInit.
type Init struct {
	ABI          int          `json:"abi"`       // the host's ABI major
	ABIMinor     int          `json:"abi_minor"` // the host's ABI minor
	ID           string       `json:"id"`
	Version      string       `json:"version"`      // the plugin's version from its manifest
	Capabilities []Capability `json:"capabilities"` // granted (a subset of those asked)
	DeviceID     string       `json:"device_id"`
	// Config holds the effective values of f_<id> when that namespace is registered (a
	// restarted instance finds it registered), else null.
	Config json.RawMessage `json:"config"`
}

// MarshalInit encodes an Init.
func MarshalInit(in Init) ([]byte, error) {
	if in.Capabilities == nil {
		in.Capabilities = []Capability{}
	}
	if len(in.Config) == 0 {
		in.Config = json.RawMessage("null")
	}
	return json.Marshal(in)
}

// UnmarshalInit decodes an Init; unknown members are ignored (a later minor may add some).
func UnmarshalInit(b []byte) (Init, error) {
	var in Init
	if err := json.Unmarshal(b, &in); err != nil {
		return Init{}, fmt.Errorf("abi: init: %w", err)
	}
	return in, nil
}

// PutRequest is an inbound Signal K PUT for a path the plugin handles (EvPut payload: u32
// id, value record).
type PutRequest struct {
	ID    uint32
	Path  string
	Value Value
}

// AppendPutRequest encodes a PutRequest.
func AppendPutRequest(b []byte, p PutRequest) []byte {
	b = appendU32(b, p.ID)
	return AppendValue(b, p.Path, p.Value)
}

// DecodePutRequest decodes a PutRequest.
func DecodePutRequest(b []byte) (PutRequest, error) {
	r := reader{b: b}
	id := r.u32()
	pv := r.value()
	return done(&r, PutRequest{ID: id, Path: pv.Path, Value: pv.Value})
}

// PutResult is a plugin's answer to an inbound PUT.
type PutResult uint8

// PUT results and the Signal K answer the host sends for each.
const (
	PutSuccess  PutResult = 0 // COMPLETED 200
	PutInvalid  PutResult = 1 // COMPLETED 400
	PutFailure  PutResult = 2 // COMPLETED 502
	PutDeferred PutResult = 3 // PENDING 202, completed by a later reply with the same id
)

var putResultNames = [...]string{
	PutSuccess: "success", PutInvalid: "invalid argument", PutFailure: "failure", PutDeferred: "deferred",
}

func (p PutResult) String() string { return enumName(putResultNames[:], uint8(p), "result") }

// PutReply is the sk_put_reply input: u32 id, u8 result, str message.
type PutReply struct {
	ID      uint32
	Result  PutResult
	Message string
}

// MaxReplyMessage bounds a PUT reply's message.
const MaxReplyMessage = 256

// AppendPutReply encodes a PutReply.
func AppendPutReply(b []byte, p PutReply) []byte {
	b = appendU32(b, p.ID)
	b = append(b, byte(p.Result))
	return appendStr(b, p.Message)
}

// DecodePutReply decodes a PutReply.
func DecodePutReply(b []byte) (PutReply, error) {
	r := reader{b: b}
	p := PutReply{ID: r.u32(), Result: PutResult(r.u8())}
	p.Message = r.str(MaxReplyMessage, "message")
	if err := r.end(); err != nil {
		return PutReply{}, err
	}
	if p.Result > PutDeferred {
		return PutReply{}, fmt.Errorf("abi: unknown PUT result %d", p.Result)
	}
	return p, nil
}

// PutAnswer is the answer to an outbound PUT (EvPutAnswer payload: u32 id, u32 status, str
// state, str message). State is COMPLETED, FAILED or TIMEOUT (no answer within 10 s);
// Status is the server's statusCode (0 when none).
type PutAnswer struct {
	ID      uint32
	Status  uint32
	State   string
	Message string
}

// AppendPutAnswer encodes a PutAnswer.
func AppendPutAnswer(b []byte, a PutAnswer) []byte {
	b = appendU32(b, a.ID)
	b = appendU32(b, a.Status)
	b = appendStr(b, a.State)
	return appendStr(b, a.Message)
}

// DecodePutAnswer decodes a PutAnswer.
func DecodePutAnswer(b []byte) (PutAnswer, error) {
	r := reader{b: b}
	a := PutAnswer{ID: r.u32(), Status: r.u32()}
	a.State = r.str(32, "state")
	a.Message = r.str(MaxReplyMessage, "message")
	return done(&r, a)
}

// AppendPutSend encodes the sk_put_send input: one value record.
func AppendPutSend(b []byte, path string, v Value) []byte { return AppendValue(b, path, v) }

// DecodePutSend decodes the sk_put_send input.
func DecodePutSend(b []byte) (PathValue, error) {
	r := reader{b: b}
	pv := r.value()
	return pv, r.end()
}

// AppendTimer encodes the EvTimer payload.
func AppendTimer(b []byte, id uint32) []byte { return appendU32(b, id) }

// DecodeTimer decodes the EvTimer payload.
func DecodeTimer(b []byte) (uint32, error) {
	r := reader{b: b}
	id := r.u32()
	return id, r.end()
}

// HTTPRequest is a request for one of the manifest's routes (EvHTTP payload: u32 id, str
// method, str route, str path, str query, str body). Route is the manifest path that matched
// (with its :params), Path the request path, both relative to /api/v1.
type HTTPRequest struct {
	ID     uint32
	Method string
	Route  string
	Path   string
	Query  string
	Body   []byte
}

// MaxHTTPRequest bounds a request's body (the server's own cap is 16 KiB).
const MaxHTTPRequest = 16 << 10

// AppendHTTPRequest encodes an HTTPRequest.
func AppendHTTPRequest(b []byte, h HTTPRequest) []byte {
	b = appendU32(b, h.ID)
	b = appendStr(b, h.Method)
	b = appendStr(b, h.Route)
	b = appendStr(b, h.Path)
	b = appendStr(b, h.Query)
	return appendBytes(b, h.Body)
}

// DecodeHTTPRequest decodes an HTTPRequest.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	r := reader{b: b}
	h := HTTPRequest{ID: r.u32()}
	h.Method = r.str(16, "method")
	h.Route = r.str(MaxRoutePath, "route")
	h.Path = r.str(2048, "path")
	h.Query = r.str(2048, "query")
	h.Body = r.bytes(MaxHTTPRequest, "body")
	return done(&r, h)
}

// HTTPResponse is the http_reply input: u32 id, u32 status, str content type, str body. An
// empty content type means application/json.
type HTTPResponse struct {
	ID          uint32
	Status      uint32
	ContentType string
	Body        []byte
}

// AppendHTTPResponse encodes an HTTPResponse.
func AppendHTTPResponse(b []byte, h HTTPResponse) []byte {
	b = appendU32(b, h.ID)
	b = appendU32(b, h.Status)
	b = appendStr(b, h.ContentType)
	return appendBytes(b, h.Body)
}

// DecodeHTTPResponse decodes an HTTPResponse; the status must be 200..599.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	r := reader{b: b}
	h := HTTPResponse{ID: r.u32(), Status: r.u32()}
	h.ContentType = r.str(MaxContentType, "content type")
	h.Body = r.bytes(MaxHTTPResponse, "body")
	if err := r.end(); err != nil {
		return HTTPResponse{}, err
	}
	if h.Status < 200 || h.Status > 599 {
		return HTTPResponse{}, fmt.Errorf("abi: HTTP status %d outside 200..599", h.Status)
	}
	for i := 0; i < len(h.ContentType); i++ {
		if c := h.ContentType[i]; c < 0x20 || c == 0x7f {
			return HTTPResponse{}, errors.New("abi: control character in content type")
		}
	}
	return h, nil
}

// HealthState is a condition state.
type HealthState uint8

// Health states.
const (
	HealthNormal HealthState = 0
	HealthWarn   HealthState = 1
	HealthAlarm  HealthState = 2
)

var healthStateNames = [...]string{HealthNormal: "normal", HealthWarn: "warn", HealthAlarm: "alarm"}

func (s HealthState) String() string { return enumName(healthStateNames[:], uint8(s), "state") }

// HealthReport is the health_report input: str name, u8 state, u8 flags, str message. The
// host's condition key is <id>.<name>.
type HealthReport struct {
	Name    string
	State   HealthState
	Reboot  bool // flag bit 0: reboot_on_alarm; needs health.reboot
	Message string
}

// ValidHealthName reports whether n is a condition name: 1 to MaxHealthName bytes of
// [A-Za-z0-9_], starting with a letter.
func ValidHealthName(n string) bool {
	if len(n) == 0 || len(n) > MaxHealthName {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}

// AppendHealthReport encodes a HealthReport.
func AppendHealthReport(b []byte, h HealthReport) []byte {
	b = appendStr(b, h.Name)
	b = append(b, byte(h.State))
	var flags byte
	if h.Reboot {
		flags |= 1
	}
	b = append(b, flags)
	return appendStr(b, h.Message)
}

// DecodeHealthReport decodes a HealthReport.
func DecodeHealthReport(b []byte) (HealthReport, error) {
	r := reader{b: b}
	h := HealthReport{Name: r.str(MaxHealthName, "condition name"), State: HealthState(r.u8())}
	flags := r.u8()
	h.Message = r.str(MaxHealthMessage, "condition message")
	if err := r.end(); err != nil {
		return HealthReport{}, err
	}
	switch {
	case !ValidHealthName(h.Name):
		return HealthReport{}, fmt.Errorf("abi: invalid condition name %q", h.Name)
	case h.State > HealthAlarm:
		return HealthReport{}, fmt.Errorf("abi: unknown health state %d", h.State)
	case flags&^1 != 0:
		return HealthReport{}, fmt.Errorf("abi: unknown health flags %#x", flags)
	}
	h.Reboot = flags&1 != 0
	return h, nil
}

// SSEEvent is the sse_publish input: str event, u8 flags, str data (JSON text).
type SSEEvent struct {
	Event  string
	Retain bool // flag bit 0: keep as the event's on-connect snapshot
	Data   []byte
}

// AppendSSEEvent encodes an SSEEvent.
func AppendSSEEvent(b []byte, e SSEEvent) []byte {
	b = appendStr(b, e.Event)
	var flags byte
	if e.Retain {
		flags |= 1
	}
	b = append(b, flags)
	return appendBytes(b, e.Data)
}

// DecodeSSEEvent decodes an SSEEvent; the data must be well-formed JSON.
func DecodeSSEEvent(b []byte) (SSEEvent, error) { return DecodeSSEEventValid(b, json.Valid) }

// DecodeSSEEventValid is DecodeSSEEvent with valid telling well-formed JSON data: the host
// checks up to 8 KiB of it per call, where encoding/json's scanner is the slow part.
func DecodeSSEEventValid(b []byte, valid func([]byte) bool) (SSEEvent, error) {
	r := reader{b: b}
	e := SSEEvent{Event: r.str(32, "event name")}
	flags := r.u8()
	e.Data = r.bytes(MaxSSEData, "event data")
	if err := r.end(); err != nil {
		return SSEEvent{}, err
	}
	if flags&^1 != 0 {
		return SSEEvent{}, fmt.Errorf("abi: unknown event flags %#x", flags)
	}
	if !valid(e.Data) {
		return SSEEvent{}, errors.New("abi: event data is not well-formed JSON")
	}
	e.Retain = flags&1 != 0
	return e, nil
}

// ClockSource is the rank of the source that set the wall clock (the spec's clock ranks).
type ClockSource uint8

// Clock sources.
const (
	ClockNone   ClockSource = 0
	ClockRTC    ClockSource = 1
	ClockSK     ClockSource = 2
	ClockManual ClockSource = 3
	ClockSNTP   ClockSource = 4
)

var clockSourceNames = [...]string{
	ClockNone: "none", ClockRTC: "rtc", ClockSK: "sk", ClockManual: "manual", ClockSNTP: "sntp",
}

func (c ClockSource) String() string { return enumName(clockSourceNames[:], uint8(c), "source") }

// Clock is the clock_now record (ClockSize bytes: i64 unix ms, i64 uptime ms, u8 synced, u8
// source, 6 zero bytes).
type Clock struct {
	UnixMs   int64
	UptimeMs int64
	Synced   bool
	Source   ClockSource
}

// AppendClock encodes a Clock.
func AppendClock(b []byte, c Clock) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(c.UnixMs))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.UptimeMs))
	var s byte
	if c.Synced {
		s = 1
	}
	return append(b, s, byte(c.Source), 0, 0, 0, 0, 0, 0)
}

// DecodeClock decodes a Clock.
func DecodeClock(b []byte) (Clock, error) {
	r := reader{b: b}
	c := Clock{UnixMs: int64(r.u64()), UptimeMs: int64(r.u64())}
	s, src := r.u8(), r.u8()
	for i := 0; i < 6; i++ {
		r.u8()
	}
	if err := r.end(); err != nil {
		return Clock{}, err
	}
	if s > 1 || src > uint8(ClockSNTP) {
		return Clock{}, errors.New("abi: malformed clock record")
	}
	c.Synced, c.Source = s == 1, ClockSource(src)
	return c, nil
}

// GPIOEdge is a watched pin's change (EvGPIO payload: u32 pin, u8 level).
type GPIOEdge struct {
	Pin   uint32
	Level uint8
}

// GPIO watch edges (gpio_watch's second argument).
const (
	EdgeNone    = 0
	EdgeRising  = 1
	EdgeFalling = 2
	EdgeBoth    = 3
)

// AppendGPIOEdge encodes a GPIOEdge.
func AppendGPIOEdge(b []byte, e GPIOEdge) []byte {
	b = appendU32(b, e.Pin)
	return append(b, e.Level)
}

// DecodeGPIOEdge decodes a GPIOEdge.
func DecodeGPIOEdge(b []byte) (GPIOEdge, error) {
	r := reader{b: b}
	e := GPIOEdge{Pin: r.u32(), Level: r.u8()}
	if err := r.end(); err != nil {
		return GPIOEdge{}, err
	}
	if e.Level > 1 {
		return GPIOEdge{}, errors.New("abi: a level is 0 or 1")
	}
	return e, nil
}

// CANFrame is a classic CAN frame (can_send input and EvCAN payload: u32 id with flag bits,
// u8 length, data). Bit 31 of the id word marks an extended (29-bit) id, bit 30 a remote
// frame.
type CANFrame struct {
	ID       uint32
	Extended bool
	Remote   bool
	Data     []byte
}

const (
	canExt = 1 << 31
	canRTR = 1 << 30
)

// AppendCANFrame encodes a CANFrame.
func AppendCANFrame(b []byte, f CANFrame) []byte {
	w := f.ID
	if f.Extended {
		w |= canExt
	}
	if f.Remote {
		w |= canRTR
	}
	b = appendU32(b, w)
	b = append(b, byte(len(f.Data)))
	return append(b, f.Data...)
}

// DecodeCANFrame decodes a CANFrame: an id of 11 bits (29 when extended), at most 8 bytes.
func DecodeCANFrame(b []byte) (CANFrame, error) {
	r := reader{b: b}
	w := r.u32()
	n := int(r.u8())
	if r.err == nil && n > MaxCANData {
		return CANFrame{}, fmt.Errorf("abi: CAN payload of %d bytes, at most %d", n, MaxCANData)
	}
	data := r.take(n)
	if err := r.end(); err != nil {
		return CANFrame{}, err
	}
	f := CANFrame{ID: w &^ (canExt | canRTR), Extended: w&canExt != 0, Remote: w&canRTR != 0, Data: data}
	if (!f.Extended && f.ID > 0x7ff) || f.ID > 0x1fffffff {
		return CANFrame{}, fmt.Errorf("abi: CAN id %#x out of range", f.ID)
	}
	return f, nil
}

// CANFilter passes a received frame when frame.ID&Mask == ID&Mask (ids without flag bits).
type CANFilter struct {
	ID   uint32
	Mask uint32
}

// AppendCANFilters encodes the can_filter input: (u32 id, u32 mask) pairs; none receives
// nothing.
func AppendCANFilters(b []byte, fs []CANFilter) []byte {
	for _, f := range fs {
		b = appendU32(b, f.ID)
		b = appendU32(b, f.Mask)
	}
	return b
}

// DecodeCANFilters decodes the can_filter input.
func DecodeCANFilters(b []byte) ([]CANFilter, error) {
	if len(b)%8 != 0 {
		return nil, errShort
	}
	if len(b)/8 > MaxCANFilters {
		return nil, fmt.Errorf("abi: more than %d CAN filters", MaxCANFilters)
	}
	out := make([]CANFilter, 0, len(b)/8)
	for i := 0; i < len(b); i += 8 {
		out = append(out, CANFilter{ID: binary.LittleEndian.Uint32(b[i:]), Mask: binary.LittleEndian.Uint32(b[i+4:])})
	}
	return out, nil
}

// BLEAdvert is a received advertisement (EvBLE payload: str address, u32 rssi as two's
// complement, str data).
type BLEAdvert struct {
	Addr string // aa:bb:cc:dd:ee:ff
	RSSI int32
	Data []byte // advertising payload
}

// AppendBLEAdvert encodes a BLEAdvert.
func AppendBLEAdvert(b []byte, a BLEAdvert) []byte {
	b = appendStr(b, a.Addr)
	b = appendU32(b, uint32(a.RSSI))
	return appendBytes(b, a.Data)
}

// DecodeBLEAdvert decodes a BLEAdvert.
func DecodeBLEAdvert(b []byte) (BLEAdvert, error) {
	r := reader{b: b}
	a := BLEAdvert{Addr: r.str(17, "address"), RSSI: int32(r.u32())}
	a.Data = r.bytes(255, "advertising data")
	return done(&r, a)
}
