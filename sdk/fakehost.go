//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"devhost/abi"
)

// current is the FakeHost driving the plugin in a native build.
var current *FakeHost

// FakeHost stands in for the device when a plugin is tested natively with go test. It plays
// the host's side of the ABI as abi/ABI.md describes it (capability checks, limits, error
// codes, replies within the delivering call) and records everything the plugin does.
// Descriptors are checked by the rules of the spec's descriptor table, as the device checks
// them (host/config's tests keep the two in agreement).
//
// Set Manifest (and optionally Granted, DeviceID, Pins) before Start; then drive the plugin
// with SetConfig, Delta, Put, Advance, HTTP, GPIOEdge, CANReceive, BLEAdvert, PutAnswer and
// Stop, and read the exported fields. Only one FakeHost runs at a time.
type FakeHost struct {
	Manifest abi.Manifest
	Granted  []abi.Capability // nil: everything the manifest asks for
	DeviceID string

	// Pins is the simulated GPIO bank; a pin not listed does not exist. Set Fault to make
	// writes and reads of a pin fail with ErrIO.
	Pins map[int]*FakePin
	// NoCAN and NoBLE make the board lack the bus or the radio (ErrUnavailable).
	NoCAN, NoBLE bool
	// NoMDNS makes the device run without mDNS (ErrUnavailable).
	NoMDNS bool
	// StreamDown makes outbound PUTs fail with ErrState, as when the Signal K stream is down.
	StreamDown bool
	// Clock is what clock_now answers; Advance moves it.
	Clock abi.Clock

	Published []PathValue            // every value published, in order
	Contexts  map[string][]PathValue // every value published to another context (PublishTo), by context, in order
	// Sourced is every value published with its own source (PublishFrom, PublishToFrom), in
	// order; each is also in Published (vessels.self) or Contexts.
	Sourced []SourcedValue
	// SourceCalls counts the sk_publish_src calls: the SDK sends the values of every source
	// queued in a batch in one call.
	SourceCalls int
	Meta        map[string]string      // declared meta by path (JSON text)
	Logs        []string               // "LEVEL message", in order
	Health      map[string]FakeHealth  // by key <id>.<name>
	Subscribed  []string               // active subscription patterns
	PutPatterns []string               // claimed PUT patterns
	PutReplies  []abi.PutReply         // every reply the plugin sent, in order
	SentPuts    []PathValue            // outbound PUTs, in order (id = index+1)
	SSE         []abi.SSEEvent         // published SSE events
	PowerHeld   bool                   // the plugin holds the power duty cycle
	SleepAsked  int                    // accepted sleep-now requests (power_sleep)
	SleepRefuse bool                   // answer power_sleep as the device does while an update is unconfirmed
	CANSent     []CANFrame             // frames sent
	CANFilters  []CANFilter            // active filters
	Scanning    bool                   // BLE scanning on
	Advertising []byte                 // BLE advertising payload
	Services    []abi.MDNSService      // mDNS services advertised, in registration order
	Descriptor  []byte                 // the registered namespace descriptor (JSON)
	Denied      map[string]int         // permission-denied answers per host function
	Calls       []string               // every host function called, in order
	Timers      map[uint32]FakeTimer   // armed timers by id
	Sockets     map[uint32]*FakeSocket // open sockets (net_open) by id
	Dormant     *abi.Wake              // the instance's dormant request; nil: none or withdrawn
	FakePeriph                         // ABI minor 2 (fakeperiph.go)

	values     map[string]any   // stored configuration values by key
	ctxLast    map[string]int64 // live contexts: the uptime (ms) of their last publication
	srcLast    map[Source]int64 // live sources (PGN 0): the uptime (ms) of their last publication
	keys       []Key
	registered bool // ns_register called by this instance
	batch      []byte
	inCall     bool
	started    bool
	stopped    bool
	openPuts   map[uint32]bool // inbound PUTs not yet answered finally
	httpReply  map[uint32]*abi.HTTPResponse
	nextID     uint32
	healthKeys []string
}

// ReadManifest reads and checks a plugin's manifest file, for a FakeHost's Manifest in the
// plugin's own tests (the manifest.json the bundle is packed with).
func ReadManifest(path string) (abi.Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return abi.Manifest{}, fmt.Errorf("sdk: %w", err)
	}
	return abi.ParseManifest(b)
}

// FakePin is a simulated GPIO pin.
type FakePin struct {
	Level  bool
	Fault  bool
	Output bool // written at least once
	Watch  Edge
}

// FakeHealth is a reported condition.
type FakeHealth struct {
	State   HealthState
	Message string
	Reboot  bool
}

// FakeTimer is an armed timer: it fires at Due (on the fake clock's uptime), then every Period.
type FakeTimer struct {
	Due    time.Duration
	Period time.Duration
}

// Start registers the running plugin's handlers with the fake host, runs its init and reports
// the init's failure. The plugin is the one given to Register, or p when not nil.
func (h *FakeHost) Start(p *Plugin) error {
	if p != nil {
		Register(p)
	}
	if rt.plugin == nil {
		return errors.New("sdk: fake host: no plugin registered")
	}
	if err := h.Manifest.Validate(); err != nil {
		return fmt.Errorf("sdk: fake host: %w", err)
	}
	if h.Granted == nil {
		h.Granted = append([]abi.Capability(nil), h.Manifest.Capabilities...)
	}
	if h.DeviceID == "" {
		h.DeviceID = "beef"
	}
	h.Meta, h.Health, h.Denied, h.Timers = map[string]string{}, map[string]FakeHealth{}, map[string]int{}, map[uint32]FakeTimer{}
	h.openPuts, h.httpReply = map[uint32]bool{}, map[uint32]*abi.HTTPResponse{}
	h.Sockets = map[uint32]*FakeSocket{}
	h.Contexts, h.ctxLast, h.srcLast = map[string][]PathValue{}, map[string]int64{}, map[Source]int64{}
	h.gattReply, h.portalReply = map[uint32]*abi.GATTReply{}, map[uint32]*abi.PortalResponse{}
	if h.values == nil {
		h.values = map[string]any{}
	}
	if h.Pins == nil {
		h.Pins = map[int]*FakePin{}
	}
	h.registered, h.started, h.stopped = false, false, false
	current = h
	resetState()
	in := abi.Init{ABI: abi.Version, ABIMinor: abi.Minor, ID: h.Manifest.ID, Version: h.Manifest.Version,
		Capabilities: h.Granted, DeviceID: h.DeviceID}
	if h.Descriptor != nil {
		in.Config, _ = h.effective()
	}
	init, err := abi.MarshalInit(in)
	if err != nil {
		return err
	}
	if rc := h.call(true, abi.AppendEvent(nil, abi.EvInit, init)); rc != 0 {
		current = nil
		return fmt.Errorf("sdk: fake host: dev_init returned %d", rc)
	}
	h.started = true
	return nil
}

// call runs one export call with batch and settles what must be answered within it.
func (h *FakeHost) call(isInit bool, batch []byte) int32 {
	h.batch, h.inCall = batch, true
	var rc int32
	if isInit {
		rc = devInitNative()
	} else {
		rc = devEventNative()
	}
	h.batch, h.inCall = nil, false
	return rc
}

func devInitNative() int32  { return dispatch(true) }
func devEventNative() int32 { return dispatch(false) }

// deliver sends one batch of events to the running plugin.
func (h *FakeHost) deliver(evs ...abi.Event) error {
	if !h.started || h.stopped {
		return errors.New("sdk: fake host: plugin not running")
	}
	var b []byte
	for _, e := range evs {
		b = abi.AppendEvent(b, e.Kind, e.Data)
	}
	if rc := h.call(false, b); rc != 0 {
		return fmt.Errorf("sdk: fake host: dev_event returned %d", rc)
	}
	return nil
}

// enter records a host call and answers what every function answers first: plugin stopped
// after stop, permission denied (counted) outside the grants; 0 to go on.
func (h *FakeHost) enter(fn string) int32 {
	h.Calls = append(h.Calls, fn)
	if h.stopped {
		return int32(abi.ErrStopped)
	}
	c := abi.FunctionCapability[fn]
	if c == "" || abi.HasCapability(h.Granted, c) {
		return 0
	}
	h.Denied[fn]++
	return int32(abi.ErrPermission)
}

func (h *FakeHost) eventRead(buf []byte) int32 {
	if rc := h.enter(abi.FnEventRead); rc != 0 {
		return rc
	}
	if len(h.batch) > len(buf) {
		return int32(len(h.batch))
	}
	return int32(copy(buf, h.batch))
}

var levelNames = []string{"DEBUG", "INFO", "WARN", "ERROR"}

func (h *FakeHost) log(level int32, msg []byte) int32 {
	if rc := h.enter(abi.FnLog); rc != 0 {
		return rc
	}
	switch {
	case level < 0 || level > 3 || !utf8.Valid(msg):
		return int32(abi.ErrInvalid)
	}
	if len(msg) > abi.MaxLogLine {
		msg = msg[:abi.MaxLogLine]
	}
	h.Logs = append(h.Logs, levelNames[level]+" "+string(msg))
	return 0
}

func (h *FakeHost) in(fn string, b []byte) int32 {
	if rc := h.enter(fn); rc != 0 {
		return rc
	}
	if len(b) > abi.MaxMessage {
		return int32(abi.ErrLimit)
	}
	switch fn {
	case abi.FnNsRegister:
		return h.nsRegister(b)
	case abi.FnSKPublish:
		vs, err := abi.DecodeValues(b, 0)
		if err != nil || len(vs) == 0 {
			return int32(abi.ErrInvalid)
		}
		h.Published = append(h.Published, vs...)
	case abi.FnSKPublishCtx:
		return h.publishContext(b)
	case abi.FnSKPublishSrc:
		return h.publishSource(b)
	case abi.FnSKMeta:
		ms, err := abi.DecodeMeta(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		for _, m := range ms {
			h.Meta[m.Path] = string(m.JSON)
		}
	case abi.FnSKSubscribe:
		return h.addPatterns(&h.Subscribed, b, abi.MaxPatterns)
	case abi.FnSKUnsub:
		ps, err := abi.DecodePatterns(b, abi.MaxPatterns)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		for _, p := range ps {
			i := indexOf(h.Subscribed, p)
			if i < 0 {
				return int32(abi.ErrNotFound)
			}
			h.Subscribed = append(h.Subscribed[:i], h.Subscribed[i+1:]...)
		}
	case abi.FnSKPutHandle:
		return h.addPatterns(&h.PutPatterns, b, abi.MaxPutHandlers)
	case abi.FnSKPutReply:
		r, err := abi.DecodePutReply(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		if !h.openPuts[r.ID] {
			return int32(abi.ErrNotFound)
		}
		if r.Result != abi.PutDeferred {
			delete(h.openPuts, r.ID)
		}
		h.PutReplies = append(h.PutReplies, r)
	case abi.FnSKPutSend:
		pv, err := abi.DecodePutSend(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		if h.StreamDown {
			return int32(abi.ErrState)
		}
		h.SentPuts = append(h.SentPuts, pv)
		return int32(len(h.SentPuts))
	case abi.FnHealthReport:
		return h.health(b)
	case abi.FnHTTPReply:
		return fakeReply(b, abi.DecodeHTTPResponse, func(r abi.HTTPResponse) uint32 { return r.ID }, h.httpReply)
	case abi.FnSSEPublish:
		e, err := abi.DecodeSSEEvent(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		if indexOf(h.Manifest.Events, e.Event) < 0 {
			return int32(abi.ErrPermission)
		}
		e.Data = slices.Clone(e.Data) // the plugin reuses its buffer
		h.SSE = append(h.SSE, e)
	case abi.FnCANSend:
		if h.NoCAN {
			return int32(abi.ErrUnavailable)
		}
		f, err := abi.DecodeCANFrame(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		f.Data = append([]byte(nil), f.Data...)
		h.CANSent = append(h.CANSent, f)
	case abi.FnCANFilter:
		if h.NoCAN {
			return int32(abi.ErrUnavailable)
		}
		fs, err := abi.DecodeCANFilters(b)
		if err != nil {
			return int32(abi.ErrLimit)
		}
		h.CANFilters = fs
	case abi.FnMDNSService:
		return h.mdnsService(b)
	case abi.FnDormant:
		return h.dormant(b)
	case abi.FnNetOpen, abi.FnNetSend:
		return h.netIn(fn, b)
	case abi.FnBLEAdvertise:
		if h.NoBLE {
			return int32(abi.ErrUnavailable)
		}
		if len(b) > abi.MaxBLEAdvertising {
			return int32(abi.ErrLimit)
		}
		h.Advertising = append([]byte(nil), b...)
	default:
		return h.periphIn(fn, b)
	}
	return 0
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

func (h *FakeHost) addPatterns(dst *[]string, b []byte, max int) int32 {
	ps, err := abi.DecodePatterns(b, max)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	var add []string
	for _, p := range ps {
		if indexOf(*dst, p) < 0 && indexOf(add, p) < 0 {
			add = append(add, p)
		}
	}
	if len(*dst)+len(add) > max {
		return int32(abi.ErrLimit)
	}
	*dst = append(*dst, add...)
	return 0
}

func (h *FakeHost) nsRegister(b []byte) int32 {
	if h.registered {
		return int32(abi.ErrConflict)
	}
	d, err := parseDescriptor(b, abi.Namespace(h.Manifest.ID))
	switch {
	case errors.Is(err, errForeignNamespace):
		return int32(abi.ErrPermission)
	case err != nil:
		return int32(abi.ErrInvalid)
	}
	h.registered = true
	h.keys = d.Keys
	h.Descriptor = append([]byte(nil), b...)
	return 0
}

// effective is the namespace's effective values: stored values over the defaults.
func (h *FakeHost) effective() ([]byte, error) {
	out := map[string]any{}
	for _, k := range h.keys {
		v := effectiveDefault(k)
		if s, ok := h.values[k.Name]; ok {
			v = s
		}
		out[k.Name] = v
	}
	return json.Marshal(out)
}

func (h *FakeHost) health(b []byte) int32 {
	r, err := abi.DecodeHealthReport(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	if r.Reboot && !abi.HasCapability(h.Granted, abi.CapHealthReboot) {
		h.Denied[abi.FnHealthReport]++
		return int32(abi.ErrPermission)
	}
	key := h.Manifest.ID + "." + r.Name
	if indexOf(h.healthKeys, key) < 0 {
		if len(h.healthKeys) == abi.MaxHealthKeys {
			return int32(abi.ErrLimit)
		}
		h.healthKeys = append(h.healthKeys, key)
	}
	h.Health[key] = FakeHealth{State: r.State, Message: r.Message, Reboot: r.Reboot}
	return 0
}

func (h *FakeHost) out(fn string, buf []byte) int32 {
	if rc := h.enter(fn); rc != 0 {
		return rc
	}
	var b []byte
	switch fn {
	case abi.FnConfigGet:
		if h.Descriptor == nil {
			return int32(abi.ErrState)
		}
		var err error
		if b, err = h.effective(); err != nil {
			return int32(abi.ErrInternal)
		}
	case abi.FnClockNow:
		b = abi.AppendClock(nil, h.Clock)
	default:
		var rc int32
		if b, rc = h.periphOut(fn); rc != 0 {
			return rc
		}
	}
	if len(b) <= len(buf) {
		copy(buf, b)
	}
	return int32(len(b))
}

func (h *FakeHost) timerSet(id int32, delayMs, periodMs int64) int32 {
	if rc := h.enter(abi.FnTimerSet); rc != 0 {
		return rc
	}
	switch {
	case id < 1 || delayMs < 0 || delayMs > abi.MaxDelayMs || periodMs < 0 || periodMs > abi.MaxDelayMs ||
		(periodMs > 0 && periodMs < abi.MinPeriodMs):
		return int32(abi.ErrInvalid)
	}
	if _, ok := h.Timers[uint32(id)]; !ok && len(h.Timers) == abi.MaxTimers {
		return int32(abi.ErrLimit)
	}
	now := time.Duration(h.Clock.UptimeMs) * time.Millisecond
	h.Timers[uint32(id)] = FakeTimer{Due: now + time.Duration(delayMs)*time.Millisecond, Period: time.Duration(periodMs) * time.Millisecond}
	return 0
}

func (h *FakeHost) args(fn string, a, b int32) int32 {
	if rc := h.enter(fn); rc != 0 {
		return rc
	}
	switch fn {
	case abi.FnTimerCancel:
		if _, ok := h.Timers[uint32(a)]; !ok {
			return int32(abi.ErrNotFound)
		}
		delete(h.Timers, uint32(a))
	case abi.FnPowerHold:
		if a != 0 && a != 1 {
			return int32(abi.ErrInvalid)
		}
		h.PowerHeld = a == 1
	case abi.FnPowerSleep:
		if a != 0 {
			return int32(abi.ErrInvalid)
		}
		if h.SleepRefuse {
			return int32(abi.ErrState)
		}
		h.SleepAsked++
	case abi.FnGPIORead, abi.FnGPIOWrite, abi.FnGPIOWatch:
		return h.gpio(fn, a, b)
	case abi.FnNetClose:
		if h.Sockets[uint32(a)] == nil {
			return int32(abi.ErrNotFound)
		}
		delete(h.Sockets, uint32(a))
	case abi.FnBLEScan:
		if h.NoBLE {
			return int32(abi.ErrUnavailable)
		}
		if a != 0 && a != 1 {
			return int32(abi.ErrInvalid)
		}
		h.Scanning = a == 1
	default:
		return h.periphArgs(fn, a)
	}
	return 0
}

func (h *FakeHost) gpio(fn string, pin, arg int32) int32 {
	p, ok := h.Pins[int(pin)]
	if !ok {
		return int32(abi.ErrNotFound)
	}
	switch fn {
	case abi.FnGPIORead:
		if p.Fault {
			return int32(abi.ErrIO)
		}
		return b2i(p.Level)
	case abi.FnGPIOWrite:
		if arg != 0 && arg != 1 {
			return int32(abi.ErrInvalid)
		}
		if p.Fault {
			return int32(abi.ErrIO)
		}
		p.Level, p.Output = arg == 1, true
	case abi.FnGPIOWatch:
		if arg < abi.EdgeNone || arg > abi.EdgeBoth {
			return int32(abi.ErrInvalid)
		}
		p.Watch = Edge(arg)
	}
	return 0
}

// SetConfig stores configuration values (key → Go value as its JSON type; a table key takes
// its JSON text) and, when the namespace is registered and the config capability granted,
// delivers a config event with the effective values.
func (h *FakeHost) SetConfig(values map[string]any) error {
	if h.values == nil {
		h.values = map[string]any{}
	}
	for k, v := range values {
		h.values[k] = v
	}
	if !h.started || h.Descriptor == nil || !abi.HasCapability(h.Granted, abi.CapConfig) {
		return nil
	}
	b, err := h.effective()
	if err != nil {
		return err
	}
	// As on the device, values that meet a dormant request's condition withdraw it.
	var vals map[string]json.RawMessage
	if h.Dormant != nil && json.Unmarshal(b, &vals) == nil && h.Dormant.ConfigWakes(vals) {
		h.Dormant = nil
	}
	return h.deliver(abi.Event{Kind: abi.EvConfig, Data: b})
}

// Delta delivers values of subscribed paths (others are dropped, as the device would).
func (h *FakeHost) Delta(values ...PathValue) error {
	var keep []PathValue
	for _, v := range values {
		for _, p := range h.Subscribed {
			if abi.MatchPattern(p, v.Path) {
				keep = append(keep, v)
				break
			}
		}
	}
	if len(keep) == 0 || !abi.HasCapability(h.Granted, abi.CapSKSubscribe) {
		return nil
	}
	return h.deliver(abi.Event{Kind: abi.EvDelta, Data: abi.AppendValues(nil, keep)})
}

// Put delivers an inbound PUT and returns the plugin's reply. Like the device, a PUT for a
// path no claimed pattern covers is answered 405 without reaching the plugin (the reply's
// Result is then PutFailure with the message "no handler"), and an unanswered PUT fails.
func (h *FakeHost) Put(path string, v any) (abi.PutReply, error) {
	val, err := ToValue(v)
	if err != nil {
		return abi.PutReply{}, err
	}
	claimed := false
	for _, p := range h.PutPatterns {
		claimed = claimed || abi.MatchPattern(p, path)
	}
	if !claimed || !abi.HasCapability(h.Granted, abi.CapSKPut) {
		return abi.PutReply{Result: abi.PutFailure, Message: "no handler"}, nil
	}
	h.nextID++
	id := h.nextID
	h.openPuts[id] = true
	n := len(h.PutReplies)
	err = h.deliver(abi.Event{Kind: abi.EvPut, Data: abi.AppendPutRequest(nil, abi.PutRequest{ID: id, Path: path, Value: val})})
	for _, r := range h.PutReplies[n:] {
		if r.ID == id {
			return r, err
		}
	}
	delete(h.openPuts, id)
	return abi.PutReply{ID: id, Result: abi.PutFailure, Message: "no answer"}, err
}

// PutAnswer delivers the answer to outbound PUT id.
func (h *FakeHost) PutAnswer(a PutAnswer) error {
	return h.deliver(abi.Event{Kind: abi.EvPutAnswer, Data: abi.AppendPutAnswer(nil, a)})
}

// Advance moves the fake clock (uptime and wall time) by d and fires the timers that fall
// due, in time order, one event per firing.
func (h *FakeHost) Advance(d time.Duration) error {
	end := time.Duration(h.Clock.UptimeMs)*time.Millisecond + d
	for {
		var next uint32
		var due time.Duration
		for id, t := range h.Timers {
			if t.Due <= end && (next == 0 || t.Due < due || t.Due == due && id < next) {
				next, due = id, t.Due
			}
		}
		if next == 0 {
			break
		}
		h.setUptime(due)
		t := h.Timers[next]
		if t.Period > 0 {
			t.Due += t.Period
			h.Timers[next] = t
		} else {
			delete(h.Timers, next)
		}
		if err := h.deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, next)}); err != nil {
			return err
		}
	}
	h.setUptime(end)
	return nil
}

func (h *FakeHost) setUptime(u time.Duration) {
	delta := u.Milliseconds() - h.Clock.UptimeMs
	h.Clock.UptimeMs += delta
	if h.Clock.UnixMs != 0 {
		h.Clock.UnixMs += delta
	}
}

// HTTP delivers a request to the manifest route matching method and path (a path with a
// query string keeps it) and returns the plugin's answer; an unanswered request is a 500, an
// unknown route a 404, as on the device.
func (h *FakeHost) HTTP(method, target, body string) (abi.HTTPResponse, error) {
	path, query, _ := strings.Cut(target, "?")
	route := ""
	for _, r := range h.Manifest.Routes {
		if r.Method == method && routeMatches(r.Path, path) {
			route = r.Path
			break
		}
	}
	if route == "" || !abi.HasCapability(h.Granted, abi.CapHTTP) {
		return abi.HTTPResponse{Status: 404, Body: []byte(`{"error":"not_found"}`)}, nil
	}
	h.nextID++
	id := h.nextID
	h.httpReply[id] = nil
	err := h.deliver(abi.Event{Kind: abi.EvHTTP, Data: abi.AppendHTTPRequest(nil, abi.HTTPRequest{
		ID: id, Method: method, Route: route, Path: path, Query: query, Body: []byte(body)})})
	r := h.httpReply[id]
	delete(h.httpReply, id)
	if r == nil {
		return abi.HTTPResponse{ID: id, Status: 500, Body: []byte(`{"error":"internal"}`)}, err
	}
	if r.ContentType == "" {
		r.ContentType = "application/json"
	}
	return *r, err
}

func routeMatches(route, path string) bool {
	rs, ps := strings.Split(route, "/"), strings.Split(path, "/")
	if len(rs) != len(ps) {
		return false
	}
	for i := range rs {
		if rs[i] != ps[i] && !(strings.HasPrefix(rs[i], ":") && ps[i] != "") {
			return false
		}
	}
	return true
}

// GPIOEdge sets a pin's level from outside and delivers the edge when the pin is watched
// for it.
func (h *FakeHost) GPIOEdge(pin int, level bool) error {
	p, ok := h.Pins[pin]
	if !ok {
		return fmt.Errorf("sdk: fake host: no pin %d", pin)
	}
	changed := p.Level != level
	p.Level = level
	want := p.Watch == EdgeBoth || level && p.Watch == EdgeRising || !level && p.Watch == EdgeFalling
	if !changed || !want || !abi.HasCapability(h.Granted, abi.CapGPIO) {
		return nil
	}
	var l uint8
	if level {
		l = 1
	}
	return h.deliver(abi.Event{Kind: abi.EvGPIO, Data: abi.AppendGPIOEdge(nil, abi.GPIOEdge{Pin: uint32(pin), Level: l})})
}

// CANReceive delivers a frame from the bus when a filter passes it.
func (h *FakeHost) CANReceive(f CANFrame) error {
	for _, flt := range h.CANFilters {
		if f.ID&flt.Mask == flt.ID&flt.Mask && abi.HasCapability(h.Granted, abi.CapCAN) {
			return h.deliver(abi.Event{Kind: abi.EvCAN, Data: abi.AppendCANFrame(nil, f)})
		}
	}
	return nil
}

// BLEAdvert delivers an advertisement while the plugin scans.
func (h *FakeHost) BLEAdvert(a BLEAdvert) error {
	if !h.Scanning {
		return nil
	}
	return h.deliver(abi.Event{Kind: abi.EvBLE, Data: abi.AppendBLEAdvert(nil, a)})
}

// Deliver sends raw records in one batch, for tests of unusual input.
func (h *FakeHost) Deliver(evs ...abi.Event) error { return h.deliver(evs...) }

// Stop delivers the stop event, then stops the plugin: later host calls answer ErrStopped,
// timers, subscriptions, PUT patterns, filters, scans and the power hold are dropped.
func (h *FakeHost) Stop() error {
	err := h.deliver(abi.Event{Kind: abi.EvStop})
	h.stopped = true
	h.Timers, h.Subscribed, h.PutPatterns, h.CANFilters = map[uint32]FakeTimer{}, nil, nil, nil
	h.Scanning, h.PowerHeld, h.Advertising, h.Services = false, false, nil, nil
	h.Sockets = map[uint32]*FakeSocket{}
	if current == h {
		current = nil
	}
	return err
}

// publishContext plays sk_publish_ctx: the device's cap of abi.MaxContexts live contexts,
// a context live until abi.ContextIdleMs after its last publication (on Clock's uptime).
func (h *FakeHost) publishContext(b []byte) int32 {
	c, vs, err := abi.DecodeContextValues(b, 0)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	if !admitLive(h.ctxLast, c, h.Clock.UptimeMs) {
		return int32(abi.ErrLimit)
	}
	h.Contexts[c] = append(h.Contexts[c], vs...)
	return 0
}

// admitLive records a publication to k at now in a table of the live keys (contexts,
// sources), and reports false when k is new while abi.MaxContexts others published within
// abi.ContextIdleMs.
func admitLive[K comparable](last map[K]int64, k K, now int64) bool {
	if _, live := last[k]; !live && len(last) >= abi.MaxContexts {
		for k, at := range last {
			if now-at >= abi.ContextIdleMs {
				delete(last, k)
			}
		}
		if len(last) >= abi.MaxContexts {
			return false
		}
	}
	last[k] = now
	return true
}

// SourcedValue is a value published with its own source, for Context ("": vessels.self).
type SourcedValue struct {
	Source  Source
	Context string
	PathValue
}

// publishSource plays sk_publish_src: one group or more, each with its source and context,
// within the device's caps of abi.MaxContexts live sources (a source's PGN does not count)
// and live contexts; a group past a cap ends the call (-4), the groups before it kept.
func (h *FakeHost) publishSource(b []byte) int32 {
	groups, err := abi.DecodeSourceGroups(b, 0)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	h.SourceCalls++
	now := h.Clock.UptimeMs
	for _, g := range groups {
		src, c, vs := g.Source, g.Context, g.Values
		if !admitLive(h.srcLast, Source{Type: src.Type, Src: src.Src, Instance: src.Instance}, now) ||
			c != "" && !admitLive(h.ctxLast, c, now) {
			return int32(abi.ErrLimit)
		}
		for _, v := range vs {
			h.Sourced = append(h.Sourced, SourcedValue{src, c, v})
		}
		if c == "" {
			h.Published = append(h.Published, vs...)
		} else {
			h.Contexts[c] = append(h.Contexts[c], vs...)
		}
	}
	return 0
}

// Values returns the latest value published at each path, by path.
func (h *FakeHost) Values() map[string]Value {
	out := map[string]Value{}
	for _, pv := range h.Published {
		out[pv.Path] = pv.Value
	}
	return out
}

// Paths returns the published paths, sorted.
func (h *FakeHost) Paths() []string {
	var out []string
	for p := range h.Values() {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// mdnsService plays mdns_service: the limits of abi.MDNSService.Check, the device's slots
// (this plugin alone uses them here), replacement of the plugin's own registration.
func (h *FakeHost) mdnsService(b []byte) int32 {
	s, err := abi.DecodeMDNSService(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	if err := s.Check(); err != nil {
		return int32(errnoOf(err))
	}
	if h.NoMDNS {
		return int32(abi.ErrUnavailable)
	}
	i := -1
	for j, o := range h.Services {
		if strings.EqualFold(o.Instance, s.Instance) && strings.EqualFold(o.Type, s.Type) && o.Proto == s.Proto {
			i = j
		}
	}
	switch {
	case s.Port == 0 && i < 0:
		return int32(abi.ErrNotFound)
	case s.Port == 0:
		h.Services = append(h.Services[:i], h.Services[i+1:]...)
	case i >= 0:
		h.Services[i] = s
	case len(h.Services) >= abi.MaxMDNSServices:
		return int32(abi.ErrLimit)
	default:
		h.Services = append(h.Services, s)
	}
	return 0
}

// errnoOf is the Errno an abi error wraps (ErrInvalid when none).
func errnoOf(err error) abi.Errno {
	var e abi.Errno
	if errors.As(err, &e) {
		return e
	}
	return abi.ErrInvalid
}

// dormant is the host's side of Dormant and Awake: the request is kept in h.Dormant. As
// the device does, a condition must be one the plugin may use, and a configuration key one
// of its registered namespace.
func (h *FakeHost) dormant(b []byte) int32 {
	if len(b) == 0 {
		h.Dormant = nil
		return 0
	}
	w, err := abi.DecodeWake(b)
	switch {
	case err != nil:
		return int32(abi.ErrInvalid)
	case w.Button && !abi.HasCapability(h.Granted, abi.CapButton),
		w.WiFiUnconfigured && !abi.HasCapability(h.Granted, abi.CapWiFiProv):
		return int32(abi.ErrPermission)
	case len(w.Config) > 0 && !h.registered:
		return int32(abi.ErrState)
	}
	for k := range w.Config {
		if !slices.ContainsFunc(h.keys, func(key Key) bool { return key.Name == k }) {
			return int32(abi.ErrInvalid)
		}
	}
	// A condition that holds already would wake the plugin at once.
	var vals map[string]json.RawMessage
	if b, err := h.effective(); len(w.Config) > 0 && (err != nil || json.Unmarshal(b, &vals) != nil || w.ConfigWakes(vals)) {
		return int32(abi.ErrState)
	}
	if w.WiFiUnconfigured && !h.WiFi.Configured {
		return int32(abi.ErrState)
	}
	h.Dormant = &w
	return 0
}
