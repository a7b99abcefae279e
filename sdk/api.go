package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"

	"devhost/abi"
)

// Level is a log line's level.
type Level int32

// Log levels.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Log writes one line to the device's log, tagged with the plugin id; the device truncates it
// to 256 bytes. Needs the log capability.
func Log(level Level, msg string) error {
	return hostErr("log", callLog(int32(level), []byte(truncate(msg, abi.MaxLogLine))))
}

// Logf formats a line and logs it.
func Logf(level Level, format string, args ...any) error {
	return Log(level, fmt.Sprintf(format, args...))
}

// ToValue turns a Go value into a Signal K value: numbers (finite) become numbers, strings
// strings, bools bools, nil null, json.RawMessage its JSON text, a Value itself; anything
// else is encoded as JSON (a struct for a position, a map for an attitude).
func ToValue(v any) (Value, error) {
	var val Value
	switch x := v.(type) {
	case nil:
		val = abi.Null()
	case Value:
		val = x
	case float64:
		val = abi.Number(x)
	case float32:
		val = abi.Number(float64(x))
	case int:
		val = abi.Number(float64(x))
	case int8:
		val = abi.Number(float64(x))
	case int16:
		val = abi.Number(float64(x))
	case int32:
		val = abi.Number(float64(x))
	case int64:
		val = abi.Number(float64(x))
	case uint:
		val = abi.Number(float64(x))
	case uint8:
		val = abi.Number(float64(x))
	case uint16:
		val = abi.Number(float64(x))
	case uint32:
		val = abi.Number(float64(x))
	case uint64:
		val = abi.Number(float64(x))
	case string:
		val = abi.String(x)
	case bool:
		val = abi.Bool(x)
	case json.RawMessage:
		val = abi.JSON(x)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return Value{}, fmt.Errorf("sdk: value: %w", err)
		}
		val = abi.JSON(b)
	}
	if err := val.Validate(); err != nil {
		return Value{}, fmt.Errorf("sdk: value: %w", err)
	}
	return val, nil
}

// Publish queues a Signal K value for vessels.self; queued values go to the device in one
// call when the running handler returns (or at Flush). It fails at once on a malformed path
// or value and without the signalk.publish capability. PublishNumber, PublishBool and
// PublishString do the same for one kind of value, with less work per value.
func Publish(path string, v any) error {
	switch x := v.(type) {
	case float64:
		return PublishNumber(path, x)
	case bool:
		return PublishBool(path, x)
	case string:
		return PublishString(path, x)
	case json.RawMessage:
		return PublishJSON(path, x)
	}
	if !checkPath(path) {
		return invalidPath(path)
	}
	val, err := ToValue(v)
	return queueValue(path, val, err)
}

// queueValue queues a value for vessels.self at a checked path, unless making it failed.
func queueValue(path string, val Value, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if !rt.canPublish {
		return errNoPublish()
	}
	rt.pub = abi.AppendValue(rt.pub, path, val)
	return queued()
}

// PublishNumber is Publish for a number (which must be finite).
func PublishNumber(path string, v float64) error {
	if !checkPath(path) {
		return invalidPath(path)
	}
	if v-v != 0 { // NaN or an infinity
		return fmt.Errorf("sdk: value: a number must be finite: %w", ErrInvalid)
	}
	if !rt.canPublish {
		return errNoPublish()
	}
	rt.pub = abi.AppendNumber(rt.pub, path, v)
	return queued()
}

// PublishBool is Publish for a bool.
func PublishBool(path string, v bool) error {
	if !checkPath(path) {
		return invalidPath(path)
	}
	if !rt.canPublish {
		return errNoPublish()
	}
	rt.pub = abi.AppendBool(rt.pub, path, v)
	return queued()
}

// PublishString is Publish for a string (UTF-8, at most 16 KiB).
func PublishString(path, v string) error {
	if !checkPath(path) {
		return invalidPath(path)
	}
	if err := abi.String(v).Validate(); err != nil {
		return fmt.Errorf("sdk: value: %w: %w", err, ErrInvalid)
	}
	if !rt.canPublish {
		return errNoPublish()
	}
	rt.pub = abi.AppendString(rt.pub, path, v)
	return queued()
}

// PublishJSON is Publish for a value the plugin encoded as JSON itself (a position, an
// attitude): as Publish(path, json.RawMessage(v)), without boxing it. The text is copied
// into the queue; v may be reused as soon as it returns.
func PublishJSON(path string, v []byte) error {
	if !checkPath(path) {
		return invalidPath(path)
	}
	val, err := queuedJSON(v)
	return queueValue(path, val, err)
}

// queuedValue is ToValue for a value appended to a queue at once: JSON text is checked the
// quick way when it can be and not copied, as the record copies it.
func queuedValue(v any) (Value, error) {
	if x, ok := v.(json.RawMessage); ok {
		return queuedJSON(x)
	}
	return ToValue(v)
}

// queuedJSON is queuedValue for JSON text. The Value shares text's bytes: it lives until
// they are appended to a queue, within the caller.
func queuedJSON(text []byte) (Value, error) {
	if len(text) > 0 && len(text) <= abi.MaxValue && quickJSON(text) {
		return abi.Value{Kind: abi.KindJSON, Str: unsafe.String(&text[0], len(text))}, nil
	}
	return ToValue(json.RawMessage(text)) // the long way, and its words for what is wrong
}

// queued counts the record just appended and sends the buffer when one more value might not
// fit in a host call.
func queued() error {
	rt.pubN++
	if rt.pubN == abi.MaxValuesPerCall || len(rt.pub) > abi.MaxMessage-(abi.MaxPath+abi.MaxValue+16) {
		return Flush()
	}
	return nil
}

func invalidPath(path string) error {
	return fmt.Errorf("sdk: publish: invalid path %q: %w", path, ErrInvalid)
}

func errNoPublish() error { return fmt.Errorf("sdk: publish: %w", ErrPermission) }

// checkPath reports whether path is a valid Signal K path, remembering valid ones by the
// address of their bytes: a plugin publishes the same few path strings (constants, or strings
// built once) again and again, and inside the device every loop iteration of a check costs a
// time-limit check. The cache holds the string itself, so its bytes are never freed and
// reused for another string while the entry lives. A slot per address hash: one comparison.
func checkPath(path string) bool {
	p := unsafe.StringData(path)
	slot := &rt.paths[(uintptr(unsafe.Pointer(p))>>3^uintptr(len(path)))%uintptr(len(rt.paths))]
	if len(path) != 0 && len(*slot) == len(path) && unsafe.StringData(*slot) == p {
		return true
	}
	if !abi.ValidPath(path) {
		return false
	}
	*slot = path
	return true
}

// Flush sends the queued values now, the own vessel's then each other context's (PublishTo),
// and returns the device's answers.
func Flush() error {
	var err error
	if rt.pubN > 0 {
		rc := callIn(abi.FnSKPublish, rt.pub)
		rt.pub, rt.pubN = rt.pub[:0], 0
		err = hostErr("publish", rc)
	}
	if len(rt.ctxPub) > 0 {
		err = errors.Join(err, flushContexts())
	}
	return err
}

// DeclareMeta declares Signal K metadata for a non-standard path the plugin publishes; meta is
// encoded as a JSON object (units, description, displayName, zones...). Needs
// signalk.publish.
func DeclareMeta(path string, meta any) error {
	b, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("sdk: meta: %w", err)
	}
	return hostErr("meta", callIn(abi.FnSKMeta, abi.AppendMeta(nil, []abi.Meta{{Path: path, JSON: b}})))
}

// Subscribe asks for deltas of paths or families (`a.b.c`, `a.b.*`, `a.b*`, `*`); they arrive
// at OnDelta. Needs signalk.subscribe.
func Subscribe(patterns ...string) error {
	return hostErr("subscribe", callIn(abi.FnSKSubscribe, abi.AppendStrings(nil, patterns)))
}

// Unsubscribe withdraws patterns given to Subscribe.
func Unsubscribe(patterns ...string) error {
	return hostErr("unsubscribe", callIn(abi.FnSKUnsub, abi.AppendStrings(nil, patterns)))
}

// HandlePuts claims the inbound PUTs of paths or families; they arrive at OnPut. Needs
// signalk.put.
func HandlePuts(patterns ...string) error {
	return hostErr("put handler", callIn(abi.FnSKPutHandle, abi.AppendStrings(nil, patterns)))
}

// PutRequest is an inbound PUT.
type PutRequest struct {
	ID    uint32
	Path  string
	Value Value
}

// Bool returns the value as a bool; ok is false for any other kind.
func (r PutRequest) Bool() (v, ok bool) { return r.Value.Bool, r.Value.Kind == abi.KindBool }

// Number returns the value as a number; ok is false for any other kind.
func (r PutRequest) Number() (float64, bool) { return r.Value.Num, r.Value.Kind == abi.KindNumber }

// PutResult is a handler's answer to an inbound PUT.
type PutResult struct {
	Code    abi.PutResult
	Message string
}

// Success answers COMPLETED 200.
func Success() PutResult { return PutResult{Code: abi.PutSuccess} }

// Invalid answers COMPLETED 400: the value is not acceptable.
func Invalid(msg string) PutResult { return PutResult{Code: abi.PutInvalid, Message: msg} }

// Failure answers COMPLETED 502: the value was fine but applying it failed.
func Failure(msg string) PutResult { return PutResult{Code: abi.PutFailure, Message: msg} }

// Deferred answers PENDING 202; complete the PUT later with CompletePut (within 30 s).
func Deferred() PutResult { return PutResult{Code: abi.PutDeferred} }

// CompletePut completes a deferred PUT with a final result, after sending queued values.
// Called while the batch that deferred it is still being handled, the final result simply
// replaces the PENDING answer.
func CompletePut(id uint32, res PutResult) error {
	if res.Code == abi.PutDeferred {
		return fmt.Errorf("sdk: complete put: a final result is needed: %w", ErrInvalid)
	}
	// Deferred within the batch still being handled: its PENDING reply has not left yet,
	// so the final result takes its place (the host would not know the id before it).
	for i := range rt.replies {
		if r := &rt.replies[i]; r.ID == id && r.Result == abi.PutDeferred {
			r.Result, r.Message = res.Code, res.Message
			return nil
		}
	}
	if err := Flush(); err != nil {
		return err
	}
	return hostErr("complete put", callIn(abi.FnSKPutReply, abi.AppendPutReply(nil, abi.PutReply{ID: id, Result: res.Code, Message: res.Message})))
}

// SendPut sends an outbound PUT to the Signal K server and returns its id; the answer comes
// to OnPutAnswer. Needs signalk.put.send.
func SendPut(path string, v any) (uint32, error) {
	val, err := ToValue(v)
	if err != nil {
		return 0, err
	}
	rc := callIn(abi.FnSKPutSend, abi.AppendPutSend(nil, path, val))
	if rc < 0 {
		return 0, hostErr("send put", rc)
	}
	return uint32(rc), nil
}

// HealthState is a condition's state.
type HealthState = abi.HealthState

// Health states.
const (
	Normal = abi.HealthNormal
	Warn   = abi.HealthWarn
	Alarm  = abi.HealthAlarm
)

// ReportHealth reports the condition <id>.<name> (name: a letter then letters, digits, _;
// at most 19 bytes; at most two names per plugin). Needs health.
func ReportHealth(name string, state HealthState, message string) error {
	return hostErr("health", callIn(abi.FnHealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: name, State: state, Message: message})))
}

// ReportHealthReboot reports a condition with the reboot flag: three policy ticks in alarm
// restart the device. Needs health and health.reboot.
func ReportHealthReboot(name string, state HealthState, message string) error {
	return hostErr("health", callIn(abi.FnHealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: name, State: state, Reboot: true, Message: message})))
}

// SetTimer arms timer id (≥ 1) to fire after delay and then every period (0: once). Setting
// an armed id replaces it. Needs timer.
func SetTimer(id uint32, delay, period time.Duration) error {
	if id == 0 || id > math.MaxInt32 {
		return fmt.Errorf("sdk: timer id %d: %w", id, ErrInvalid)
	}
	return hostErr("timer", callTimerSet(int32(id), delay.Milliseconds(), period.Milliseconds()))
}

// CancelTimer disarms timer id.
func CancelTimer(id uint32) error {
	if id == 0 || id > math.MaxInt32 {
		return fmt.Errorf("sdk: timer id %d: %w", id, ErrInvalid)
	}
	return hostErr("timer", callArgs(abi.FnTimerCancel, int32(id), 0))
}

// HoldPower keeps the device's power duty cycle awake (true) or releases the hold (false).
// Needs power.hold.
func HoldPower(on bool) error {
	return hostErr("power hold", callArgs(abi.FnPowerHold, b2i(on), 0))
}

// SleepNow asks the device for deep sleep now, on the application's own schedule: it flushes
// the Signal K stream and sleeps `power.interval_s`. The device refuses (ErrState) while an
// update is unconfirmed or in progress. Needs power.sleep (ABI minor 1).
func SleepNow() error {
	return hostErr("sleep now", callArgs(abi.FnPowerSleep, 0, 0))
}

// Clock is the device's clock.
type Clock struct {
	Time   time.Time     // wall time (meaningful when Synced)
	Uptime time.Duration // since the device started
	Synced bool
	Source string // none, rtc, sk, manual, sntp
}

// Now reads the device's clock. Needs clock.
func Now() (Clock, error) {
	var b [abi.ClockSize]byte
	rc := callOut(abi.FnClockNow, b[:])
	if rc < 0 {
		return Clock{}, hostErr("clock", rc)
	}
	if int(rc) != abi.ClockSize {
		return Clock{}, errors.New("sdk: clock: malformed answer")
	}
	c, err := abi.DecodeClock(b[:])
	if err != nil {
		return Clock{}, fmt.Errorf("sdk: clock: %w", err)
	}
	return Clock{Time: time.UnixMilli(c.UnixMs).UTC(), Uptime: time.Duration(c.UptimeMs) * time.Millisecond,
		Synced: c.Synced, Source: c.Source.String()}, nil
}

// Emit publishes an SSE event the manifest declares, with data encoded as JSON; retain keeps
// it as the event's snapshot for newly connected clients. Needs events.
func Emit(event string, data any, retain bool) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("sdk: event: %w", err)
	}
	return emit(event, b, retain)
}

// EmitJSON is Emit for data the plugin already encoded as JSON; the host checks that it is.
// It spares re-encoding (and so re-validating) a large document, which is slow inside the
// sandbox. Needs events.
func EmitJSON(event string, data []byte, retain bool) error { return emit(event, data, retain) }

// emit sends an event through a buffer kept from call to call: the device copies the
// message during the call, and a message built anew grew (and copied) its up to 8 KiB of
// data several times, a large part of sending it inside the sandbox.
func emit(event string, data []byte, retain bool) error {
	rt.emit = abi.AppendSSEEvent(rt.emit[:0], abi.SSEEvent{Event: event, Retain: retain, Data: data})
	rc := callIn(abi.FnSSEPublish, rt.emit)
	if cap(rt.emit) > keepEmit {
		rt.emit = nil // an event too large for the device does not keep its buffer alive
	}
	return hostErr("event", rc)
}

// keepEmit bounds the event buffer kept between calls: room for the largest event the
// device takes.
const keepEmit = 2 * abi.MaxSSEData

// GPIORead reads a pin. Needs gpio.
func GPIORead(pin int) (bool, error) {
	rc := callArgs(abi.FnGPIORead, int32(pin), 0)
	if rc < 0 {
		return false, hostErr("gpio read", rc)
	}
	return rc == 1, nil
}

// GPIOWrite drives an output pin; a pin fault is ErrIO. Needs gpio.
func GPIOWrite(pin int, level bool) error {
	return hostErr("gpio write", callArgs(abi.FnGPIOWrite, int32(pin), b2i(level)))
}

// Edge selects the pin changes GPIOWatch reports.
type Edge int32

// Edges.
const (
	EdgeNone    Edge = abi.EdgeNone
	EdgeRising  Edge = abi.EdgeRising
	EdgeFalling Edge = abi.EdgeFalling
	EdgeBoth    Edge = abi.EdgeBoth
)

// GPIOWatch reports the pin's edges to OnGPIO (EdgeNone stops). Needs gpio.
func GPIOWatch(pin int, edges Edge) error {
	return hostErr("gpio watch", callArgs(abi.FnGPIOWatch, int32(pin), int32(edges)))
}

// CANSend sends a frame on the CAN bus. Needs can.
func CANSend(f CANFrame) error {
	return hostErr("can send", callIn(abi.FnCANSend, abi.AppendCANFrame(nil, f)))
}

// CANReceive sets the receive filters (none: receive nothing); frames arrive at OnCAN.
// Needs can.
func CANReceive(filters ...CANFilter) error {
	return hostErr("can filter", callIn(abi.FnCANFilter, abi.AppendCANFilters(nil, filters)))
}

// BLEScan starts (true) or stops passive BLE scanning; adverts arrive at OnBLE. Needs ble.
func BLEScan(on bool) error {
	return hostErr("ble scan", callArgs(abi.FnBLEScan, b2i(on), 0))
}

// BLEAdvertise sets the advertising payload (at most 31 bytes); empty stops. Needs ble.
func BLEAdvertise(data []byte) error {
	return hostErr("ble advertise", callIn(abi.FnBLEAdvertise, data))
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// Config is the plugin namespace's effective values keyed by key name.
type Config map[string]json.RawMessage

// GetConfig reads the namespace's effective values. Needs config and a registered namespace.
func GetConfig() (Config, error) {
	b, err := readOut(abi.FnConfigGet, "config", 4<<10)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil || c == nil {
		return nil, errors.New("sdk: config: the values are not a JSON object")
	}
	return c, nil
}

// String returns a string key's value ("" when absent or not a string).
func (c Config) String(key string) string {
	var s string
	_ = json.Unmarshal(c[key], &s)
	return s
}

// Int returns an int key's value (0 when absent or not an integer).
func (c Config) Int(key string) int64 {
	n, _ := strconv.ParseInt(string(c[key]), 10, 64)
	return n
}

// Float returns a number key's value (0 when absent or not a number).
func (c Config) Float(key string) float64 {
	var f float64
	_ = json.Unmarshal(c[key], &f)
	return f
}

// Bool returns a bool key's value (false when absent or not a bool).
func (c Config) Bool(key string) bool {
	var b bool
	_ = json.Unmarshal(c[key], &b)
	return b
}

// Table decodes a `format: table` key (a string holding a JSON array of rows) into rows,
// a pointer to a slice of structs or maps.
func (c Config) Table(key string, rows any) error {
	raw, ok := c[key]
	if !ok {
		return fmt.Errorf("sdk: config: no key %q", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("sdk: config: %s is not a table: %w", key, err)
	}
	if err := json.Unmarshal([]byte(s), rows); err != nil {
		return fmt.Errorf("sdk: config: table %s: %w", key, err)
	}
	return nil
}

// Key types and the table format of namespace descriptors.
const (
	TypeBool    = "bool"
	TypeInt     = "int"
	TypeFloat   = "float"
	TypeString  = "string"
	TypeBlob    = "blob"
	FormatTable = "table"
)

// Namespace is a configuration namespace descriptor (the device's descriptor table). Its name
// is always f_<id>.
type Namespace struct {
	Version     int    `json:"version"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	Keys        []Key  `json:"keys"`
}

// Key is one key descriptor; the JSON form is the ABI's, shared with the device.
type Key = abi.KeyDescriptor[any]

// Display holds a key's presentation hints; Format "table" with Columns makes a table key.
type Display = abi.Display

// Float is a helper for the descriptor's optional numbers.
func Float(f float64) *float64 { return &f }

// RegisterNamespace registers the plugin's namespace f_<id>. Needs config.
func RegisterNamespace(ns Namespace) error {
	b, err := json.Marshal(ns)
	if err != nil {
		return fmt.Errorf("sdk: namespace: %w", err)
	}
	return RegisterNamespaceJSON(b)
}

// RegisterNamespaceJSON registers a descriptor written as JSON.
func RegisterNamespaceJSON(descriptor []byte) error {
	return hostErr("register namespace", callIn(abi.FnNsRegister, descriptor))
}
