//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"devhost/abi"
)

func start(t *testing.T, p *Plugin, caps ...abi.Capability) *FakeHost {
	t.Helper()
	m := abi.Manifest{ID: "t", Name: "Test", Version: "0.1.0", ABI: abi.Version, Capabilities: caps}
	if abi.HasCapability(caps, abi.CapHTTP) {
		m.Routes = []abi.Route{{Method: "GET", Path: "/t"}, {Method: "POST", Path: "/t/:a/x/:b"}}
	}
	if abi.HasCapability(caps, abi.CapEvents) {
		m.Events = []string{"t"}
	}
	h := &FakeHost{Manifest: m, Pins: map[int]*FakePin{1: {}}}
	if err := h.Start(p); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { current = nil })
	return h
}

func count(calls []string, fn string) int {
	n := 0
	for _, c := range calls {
		if c == fn {
			n++
		}
	}
	return n
}

func TestEveryCallNeedsItsCapability(t *testing.T) {
	h := start(t, &Plugin{})
	h.Granted = []abi.Capability{abi.CapHealth} // health alone: the reboot flag stays denied
	calls := map[string]func() error{
		abi.FnLog:          func() error { return Log(LevelInfo, "x") },
		abi.FnNsRegister:   func() error { return RegisterNamespaceJSON([]byte(`{}`)) },
		abi.FnConfigGet:    func() error { _, err := GetConfig(); return err },
		abi.FnSKMeta:       func() error { return DeclareMeta("a.b", map[string]string{}) },
		abi.FnSKSubscribe:  func() error { return Subscribe("a.*") },
		abi.FnSKUnsub:      func() error { return Unsubscribe("a.*") },
		abi.FnSKPutHandle:  func() error { return HandlePuts("a.*") },
		abi.FnSKPutReply:   func() error { return CompletePut(1, Success()) },
		abi.FnSKPutSend:    func() error { _, err := SendPut("a.b", 1); return err },
		abi.FnTimerSet:     func() error { return SetTimer(1, time.Second, 0) },
		abi.FnTimerCancel:  func() error { return CancelTimer(1) },
		abi.FnPowerHold:    func() error { return HoldPower(true) },
		abi.FnPowerSleep:   func() error { return SleepNow() },
		abi.FnClockNow:     func() error { _, err := Now(); return err },
		abi.FnSSEPublish:   func() error { return Emit("t", 1, false) },
		abi.FnGPIORead:     func() error { _, err := GPIORead(1); return err },
		abi.FnGPIOWrite:    func() error { return GPIOWrite(1, true) },
		abi.FnGPIOWatch:    func() error { return GPIOWatch(1, EdgeBoth) },
		abi.FnCANSend:      func() error { return CANSend(CANFrame{ID: 1}) },
		abi.FnCANFilter:    func() error { return CANReceive() },
		abi.FnBLEScan:      func() error { return BLEScan(true) },
		abi.FnBLEAdvertise: func() error { return BLEAdvertise(nil) },
		abi.FnMDNSService:  func() error { return AdvertiseService(MDNSService{Type: "_x", Proto: "_tcp", Port: 1}) },
		abi.FnNetOpen:      func() error { _, err := NetDial("h", 1); return err },
		abi.FnNetSend:      func() error { return NetSend(1, nil) },
		abi.FnNetClose:     func() error { return NetClose(1) },
	}
	for fn, call := range calls {
		if err := call(); !errors.Is(err, ErrPermission) {
			t.Errorf("%s: %v, want permission denied", fn, err)
		}
		if h.Denied[fn] != 1 {
			t.Errorf("%s: denied count %d", fn, h.Denied[fn])
		}
	}
	if err := ReportHealthReboot("x", Alarm, "m"); !errors.Is(err, ErrPermission) {
		t.Errorf("reboot flag: %v", err)
	}
	if err := ReportHealth("x", Warn, "m"); err != nil {
		t.Errorf("health without the flag: %v", err)
	}
	// Publish is checked at once (it is buffered) and never reaches the host.
	if err := Publish("a.b", 1); !errors.Is(err, ErrPermission) {
		t.Errorf("publish: %v", err)
	}
}

func TestPublishesOneHostCallPerBatch(t *testing.T) {
	h := start(t, &Plugin{OnTimer: func(id uint32) {
		for i := 0; i < 3; i++ {
			if err := Publish(fmt.Sprintf("bench.t%d.v%d", id, i), float64(i)); err != nil {
				t.Error(err)
			}
		}
	}}, abi.CapSKPublish)
	var evs []abi.Event
	for i := 1; i <= 100; i++ {
		evs = append(evs, abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, uint32(i))})
	}
	if err := h.Deliver(evs...); err != nil {
		t.Fatal(err)
	}
	if n := count(h.Calls, abi.FnSKPublish); n != 1 {
		t.Fatalf("%d sk_publish calls for one batch", n)
	}
	if len(h.Published) != 300 || h.Published[299].Path != "bench.t100.v2" {
		t.Fatalf("%d values, last %+v", len(h.Published), h.Published[len(h.Published)-1])
	}
}

func TestPublishFlushesAtTheLimit(t *testing.T) {
	h := start(t, &Plugin{OnInit: func(Info) error {
		for i := 0; i < 2*abi.MaxValuesPerCall+2; i++ {
			if err := Publish("a.b", i); err != nil {
				return err
			}
		}
		return nil
	}}, abi.CapSKPublish)
	if n := count(h.Calls, abi.FnSKPublish); n != 3 {
		t.Fatalf("%d sk_publish calls, want 3", n)
	}
	if len(h.Published) != 2*abi.MaxValuesPerCall+2 {
		t.Fatalf("%d values", len(h.Published))
	}
	// Big values flush by size before the message limit.
	h.Published, h.Calls = nil, nil
	big := strings.Repeat("x", abi.MaxValue)
	err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rt.plugin.OnTimer = func(uint32) {}
	for i := 0; i < 40; i++ {
		if err := Publish("a.b", big); err != nil {
			t.Fatal(err)
		}
	}
	if err := Flush(); err != nil {
		t.Fatal(err)
	}
	if len(h.Published) != 40 || count(h.Calls, abi.FnSKPublish) < 3 {
		t.Fatalf("%d values in %d calls", len(h.Published), count(h.Calls, abi.FnSKPublish))
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	start(t, &Plugin{}, abi.CapSKPublish)
	for name, c := range map[string]struct {
		path string
		v    any
	}{
		"path":  {"a..b", 1},
		"nan":   {"a.b", math.NaN()},
		"inf":   {"a.b", math.Inf(1)},
		"chan":  {"a.b", make(chan int)},
		"long":  {"a.b", strings.Repeat("x", abi.MaxValue+1)},
		"utf8":  {"a.b", "\xff"},
		"empty": {"", 1},
	} {
		if err := Publish(c.path, c.v); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, v := range []any{int8(1), int16(1), int32(1), int64(1), uint(1), uint8(1), uint16(1), uint32(1), uint64(1), float32(1)} {
		val, err := ToValue(v)
		if err != nil || val.Kind != abi.KindNumber || val.Num != 1 {
			t.Errorf("%T: %+v %v", v, val, err)
		}
	}
	if v, _ := ToValue(struct{ A int }{2}); v.Kind != abi.KindJSON || v.Str != `{"A":2}` {
		t.Errorf("struct: %+v", v)
	}
	if v, _ := ToValue(nil); v.Kind != abi.KindNull {
		t.Errorf("nil: %+v", v)
	}
}

func TestPutRepliesFollowPublishedValues(t *testing.T) {
	h := start(t, &Plugin{
		OnInit: func(Info) error { return HandlePuts("a.*") },
		OnPut: func(req PutRequest) PutResult {
			if on, ok := req.Bool(); ok {
				_ = Publish(req.Path, on)
				return Success()
			}
			return Invalid("bool")
		},
	}, abi.CapSKPut, abi.CapSKPublish)
	h.Calls = nil
	r, err := h.Put("a.b", true)
	if err != nil || r.Result != abi.PutSuccess {
		t.Fatalf("put: %+v %v", r, err)
	}
	pub, rep := indexOf(h.Calls, abi.FnSKPublish), indexOf(h.Calls, abi.FnSKPutReply)
	if pub < 0 || rep < 0 || pub > rep {
		t.Fatalf("calls %v: the value must go out before the reply", h.Calls)
	}
	if r, _ := h.Put("a.b", 3); r.Result != abi.PutInvalid || r.Message != "bool" {
		t.Fatalf("invalid: %+v", r)
	}
	if err := CompletePut(99, Deferred()); !errors.Is(err, ErrInvalid) {
		t.Fatalf("complete with deferred: %v", err)
	}
	if err := CompletePut(99, Success()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("complete unknown: %v", err)
	}
}

// A PUT deferred and completed within one event batch (here, its timer in the same batch)
// leaves the host one final reply, not a completion followed by a PENDING it no longer knows.
func TestPutDeferredAndCompletedInOneBatch(t *testing.T) {
	var completeErr error
	h := start(t, &Plugin{
		OnInit: func(Info) error { return HandlePuts("a.b") },
		OnPut:  func(PutRequest) PutResult { return Deferred() },
		OnTimer: func(uint32) {
			completeErr = CompletePut(7, Failure("switched off"))
		},
	}, abi.CapSKPut, abi.CapTimer, abi.CapLog)
	h.openPuts[7] = true
	val, err := ToValue(true)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Deliver(abi.Event{Kind: abi.EvPut, Data: abi.AppendPutRequest(nil, abi.PutRequest{ID: 7, Path: "a.b", Value: val})},
		abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	if completeErr != nil {
		t.Fatalf("complete: %v", completeErr)
	}
	if len(h.PutReplies) != 1 || h.PutReplies[0] != (abi.PutReply{ID: 7, Result: abi.PutFailure, Message: "switched off"}) {
		t.Fatalf("replies %+v", h.PutReplies)
	}
	if len(h.Logs) != 0 {
		t.Fatalf("logged %q", h.Logs) // e.g. the PENDING reply refused as unknown
	}
}

func TestPutWithoutHandlerFails(t *testing.T) {
	h := start(t, &Plugin{OnInit: func(Info) error { return HandlePuts("a.b") }}, abi.CapSKPut)
	r, err := h.Put("a.b", 1)
	if err != nil || r.Result != abi.PutFailure || r.Message != "no PUT handler" {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestHTTP(t *testing.T) {
	var got *Request
	h := start(t, &Plugin{OnHTTP: func(req *Request) Response {
		got = req
		if req.Method == "POST" {
			var body struct{ On bool }
			if err := req.DecodeJSON(&body); err != nil {
				return ErrorResponse(400, "validation")
			}
			return Response{Status: 204}
		}
		return Response{ContentType: "text/plain", Body: []byte("hi")}
	}}, abi.CapHTTP)
	r, err := h.HTTP("GET", "/t", "")
	if err != nil || r.Status != 200 || r.ContentType != "text/plain" || string(r.Body) != "hi" {
		t.Fatalf("GET: %+v %v", r, err)
	}
	r, _ = h.HTTP("POST", "/t/one/x/two?q=1", `{"On":true}`)
	if r.Status != 204 || got.Param("a") != "one" || got.Param("b") != "two" || got.Param("c") != "" || got.Query().Get("q") != "1" {
		t.Fatalf("POST: %+v %+v", r, got)
	}
	for _, body := range []string{`{"Off":true}`, `{"On":true} {}`, `[`} {
		if r, _ := h.HTTP("POST", "/t/a/x/b", body); r.Status != 400 {
			t.Errorf("body %s: %d", body, r.Status)
		}
	}
	if r, _ := h.HTTP("DELETE", "/t", ""); r.Status != 404 {
		t.Fatalf("unknown route: %d", r.Status)
	}
}

func TestHTTPWithoutHandler(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapHTTP)
	r, err := h.HTTP("GET", "/t", "")
	if err != nil || r.Status != 404 || string(r.Body) != `{"error":"not_found"}` {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestBadRecordFailsTheCallButNotTheRest(t *testing.T) {
	var fired []uint32
	h := start(t, &Plugin{OnTimer: func(id uint32) { fired = append(fired, id) }}, abi.CapLog)
	err := h.Deliver(
		abi.Event{Kind: abi.EvTimer, Data: []byte{1, 2}},
		abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 5)},
		abi.Event{Kind: 250, Data: []byte("a kind from a later minor")},
	)
	if err == nil {
		t.Fatal("a malformed record did not fail the call")
	}
	if len(fired) != 1 || fired[0] != 5 {
		t.Fatalf("fired %v", fired)
	}
	if len(h.Logs) != 1 || !strings.Contains(h.Logs[0], "timer event") {
		t.Fatalf("logs %v", h.Logs)
	}
	// An init record outside dev_init is refused too.
	if err := h.Deliver(abi.Event{Kind: abi.EvInit, Data: []byte(`{}`)}); err == nil {
		t.Fatal("init record in dev_event accepted")
	}
}

func TestInitFailure(t *testing.T) {
	h := &FakeHost{Manifest: abi.Manifest{ID: "t", Name: "T", Version: "1", ABI: 1, Capabilities: []abi.Capability{abi.CapLog}}}
	err := h.Start(&Plugin{OnInit: func(Info) error { return errors.New("no sensor") }})
	if err == nil {
		t.Fatal("failed init started")
	}
	if len(h.Logs) != 1 || !strings.Contains(h.Logs[0], "no sensor") {
		t.Fatalf("logs %v", h.Logs)
	}
	if rc := dispatch(false); rc != 1 {
		t.Fatal("dev_event ran after a failed init")
	}
	current = nil
	if err := Log(LevelInfo, "x"); !errors.Is(err, ErrStopped) {
		t.Fatalf("no host: %v", err)
	}
}

func TestLargeBatchAndConfigGrowBuffers(t *testing.T) {
	var got int
	long := strings.Repeat("v", 3000)
	h := start(t, &Plugin{
		OnInit: func(Info) error {
			if err := Subscribe("*"); err != nil {
				return err
			}
			return RegisterNamespace(Namespace{Version: 1, Title: "Big", Keys: []Key{
				{Name: "a", Type: TypeString, Default: long, MaxLength: 3999},
				{Name: "b", Type: TypeString, Default: long, MaxLength: 3999},
			}})
		},
		OnDelta: func(vs []PathValue) { got += len(vs) },
	}, abi.CapSKSubscribe, abi.CapConfig)
	var vs []PathValue
	for i := 0; i < 3000; i++ {
		vs = append(vs, PathValue{Path: fmt.Sprintf("a.long.path.number%d", i), Value: abi.String(long[:30])})
	}
	if err := h.Delta(vs...); err != nil {
		t.Fatal(err)
	}
	if got != 3000 || cap(rt.buf) <= 64<<10 {
		t.Fatalf("got %d values, buffer %d", got, cap(rt.buf))
	}
	cfg, err := GetConfig()
	if err != nil || cfg.String("a") != long || cfg.String("b") != long {
		t.Fatalf("config of %d bytes: %v", len(cfg.String("a")), err)
	}
}

func TestConfigAccessors(t *testing.T) {
	c := Config{"s": []byte(`"x"`), "i": []byte(`42`), "f": []byte(`1.5`), "b": []byte(`true`),
		"t": []byte(`"[{\"n\":1}]"`), "bad": []byte(`"[{"`)}
	if c.String("s") != "x" || c.Int("i") != 42 || c.Float("f") != 1.5 || !c.Bool("b") || c.String("missing") != "" {
		t.Fatal("accessors")
	}
	var rows []map[string]int
	if err := c.Table("t", &rows); err != nil || rows[0]["n"] != 1 {
		t.Fatalf("table %v %v", rows, err)
	}
	for _, k := range []string{"bad", "i", "missing"} {
		if err := c.Table(k, &rows); err == nil {
			t.Errorf("table %s decoded", k)
		}
	}
}

func TestNamespaceRegistration(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapConfig)
	if _, err := GetConfig(); !errors.Is(err, ErrState) {
		t.Fatalf("config before registration: %v", err)
	}
	for name, d := range map[string]string{
		"malformed": `{"version":1,"title":"x","keys":[{"name":"bad name","type":"int","default":1}]}`,
		"no title":  `{"version":1,"keys":[]}`,
		"unknown":   `{"version":1,"title":"x","keys":[],"extra":1}`,
	} {
		if err := RegisterNamespaceJSON([]byte(d)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := RegisterNamespaceJSON([]byte(`{"namespace":"wifi","version":1,"title":"x","keys":[]}`)); !errors.Is(err, ErrPermission) {
		t.Errorf("foreign namespace: %v", err)
	}
	ok := Namespace{Version: 1, Title: "T", Keys: []Key{{Name: "on", Type: TypeBool, Default: false}}}
	if err := RegisterNamespace(ok); err != nil {
		t.Fatal(err)
	}
	if err := RegisterNamespace(ok); !errors.Is(err, ErrConflict) {
		t.Fatalf("second registration: %v", err)
	}
	// A restarted instance finds its namespace registered and may register it again.
	var seen string
	if err := h.Start(&Plugin{OnInit: func(in Info) error {
		seen = string(in.Config)
		return RegisterNamespace(ok)
	}}); err != nil {
		t.Fatal(err)
	}
	if seen != `{"on":false}` {
		t.Fatalf("init config %s", seen)
	}
}

func TestHostLimits(t *testing.T) {
	start(t, &Plugin{}, abi.CapHealth, abi.CapTimer, abi.CapSKSubscribe, abi.CapLog)
	if err := ReportHealth("one", Warn, "m"); err != nil {
		t.Fatal(err)
	}
	if err := ReportHealth("two", Warn, "m"); err != nil {
		t.Fatal(err)
	}
	if err := ReportHealth("three", Warn, "m"); !errors.Is(err, ErrLimit) {
		t.Fatalf("third name: %v", err)
	}
	if err := ReportHealth("one", Normal, strings.Repeat("m", 96)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("long message: %v", err)
	}
	for i := 1; i <= abi.MaxTimers; i++ {
		if err := SetTimer(uint32(i), time.Second, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := SetTimer(99, time.Second, 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("33rd timer: %v", err)
	}
	if err := SetTimer(1, time.Second, time.Millisecond); !errors.Is(err, ErrInvalid) {
		t.Fatalf("1 ms period: %v", err)
	}
	if err := SetTimer(0, time.Second, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("timer 0: %v", err)
	}
	if err := CancelTimer(77); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	for i := 0; i < abi.MaxPatterns; i++ {
		if err := Subscribe(fmt.Sprintf("p%d.*", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := Subscribe("more.*"); !errors.Is(err, ErrLimit) {
		t.Fatalf("17th pattern: %v", err)
	}
	if err := Subscribe("bad pattern"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad pattern: %v", err)
	}
	if err := Log(LevelError+1, "x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad level: %v", err)
	}
}

func TestLogTruncatesOnARuneBoundary(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapLog)
	msg := strings.Repeat("a", abi.MaxLogLine-1) + "é and more"
	if err := Log(LevelWarn, msg); err != nil {
		t.Fatal(err)
	}
	line := strings.TrimPrefix(h.Logs[0], "WARN ")
	if len(line) != abi.MaxLogLine-1 || !utf8.ValidString(line) {
		t.Fatalf("line of %d bytes, valid %v", len(line), utf8.ValidString(line))
	}
}

func TestStopDropsEverything(t *testing.T) {
	stopped := false
	h := start(t, &Plugin{
		OnInit: func(Info) error {
			_ = HoldPower(true)
			_ = Subscribe("a.*")
			return SetTimer(1, time.Second, time.Second)
		},
		OnStop: func() { stopped = true; _ = Publish("a.b", 1) },
	}, abi.CapPowerHold, abi.CapSKSubscribe, abi.CapTimer, abi.CapSKPublish)
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if !stopped || len(h.Published) != 1 {
		t.Fatalf("stop handler ran %v, published %d", stopped, len(h.Published))
	}
	if h.PowerHeld || len(h.Timers) != 0 || len(h.Subscribed) != 0 {
		t.Fatal("the hold, timers or subscriptions survived the stop")
	}
	if err := h.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer}); err == nil {
		t.Fatal("delivered to a stopped plugin")
	}
}

func TestCANAndBLEUnavailable(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapCAN, abi.CapBLE)
	h.NoCAN, h.NoBLE = true, true
	if err := CANSend(CANFrame{ID: 1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("can: %v", err)
	}
	if err := BLEScan(true); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ble: %v", err)
	}
	h.NoCAN = false
	if err := CANSend(CANFrame{ID: 0x800}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("11-bit id 0x800: %v", err)
	}
}

func TestSendPutWhileStreamDown(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapSKPutSend)
	h.StreamDown = true
	if _, err := SendPut("a.b", 1); !errors.Is(err, ErrState) {
		t.Fatalf("%v", err)
	}
	if _, err := SendPut("a b", 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad path: %v", err)
	}
}

// The typed publishers check what Publish checks, and the cache of valid paths never lets an
// invalid path through: not a new string with the length of a cached one, not a string built
// at run time that repeats a cached path's bytes.
func TestTypedPublish(t *testing.T) {
	var errs []error
	h := start(t, &Plugin{OnInit: func(Info) error {
		built := []byte("a.b")
		bad := []byte("a b")
		errs = []error{
			PublishNumber("a.b", 1.5),
			PublishNumber("a.b", 2),                    // cached path
			PublishNumber(string(built), 3),            // same bytes, another string
			PublishNumber(string(bad), 4),              // invalid, same length as a cached path
			PublishNumber("a.c", math.NaN()),           // not finite
			PublishNumber("a.c", math.Inf(1)),          // not finite
			PublishBool("s.t", true),                   // bool
			PublishString("s.u", "on"),                 // string
			PublishString("s.u", "\xff"),               // not UTF-8
			PublishString("s..u", "on"),                // invalid path
			Publish("s.v", false),                      // Publish's fast paths
			Publish("s.w", "x"),                        //
			Publish("s.x", 7.0),                        //
			Publish("s.y", 8),                          // the general path
			PublishNumber(strings.Repeat("a", 300), 1), // too long
		}
		return nil
	}}, abi.CapSKPublish)
	wantErr := []bool{false, false, false, true, true, true, false, false, true, true, false, false, false, false, true}
	for i, err := range errs {
		if (err != nil) != wantErr[i] || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("call %d: %v", i, err)
		}
	}
	want := []PathValue{{Path: "a.b", Value: abi.Number(1.5)}, {Path: "a.b", Value: abi.Number(2)},
		{Path: "a.b", Value: abi.Number(3)}, {Path: "s.t", Value: abi.Bool(true)}, {Path: "s.u", Value: abi.String("on")},
		{Path: "s.v", Value: abi.Bool(false)}, {Path: "s.w", Value: abi.String("x")}, {Path: "s.x", Value: abi.Number(7)},
		{Path: "s.y", Value: abi.Number(8)}}
	if !reflect.DeepEqual(h.Published, want) {
		t.Fatalf("published %+v", h.Published)
	}
}

// Without the grant every typed publisher refuses, also for a path already cached as valid.
func TestTypedPublishNeedsGrant(t *testing.T) {
	start(t, &Plugin{}, abi.CapSKPublish)
	if err := PublishNumber("a.b", 1); err != nil {
		t.Fatal(err)
	}
	start(t, &Plugin{})
	for i, err := range []error{PublishNumber("a.b", 1), PublishBool("a.b", true), PublishString("a.b", "x"), Publish("a.b", 1)} {
		if !errors.Is(err, ErrPermission) {
			t.Errorf("call %d: %v", i, err)
		}
	}
}

// Frames a handler keeps stay as they were after later batches, and growing one never
// changes another, though their copies share blocks.
func TestKeptFramesStay(t *testing.T) {
	var kept []CANFrame
	h := start(t, &Plugin{
		OnInit: func(Info) error { return CANReceive(CANFilter{}) },
		OnCAN:  func(f CANFrame) { kept = append(kept, f) },
	}, abi.CapCAN)
	for i := 0; i < 1000; i++ {
		n := i % 9
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i + j)
		}
		if err := h.CANReceive(CANFrame{ID: uint32(i), Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if len(kept) > 2 {
		kept[1].Data = append(kept[1].Data, 0xaa, 0xbb) // must not reach kept[2]
	}
	for i, f := range kept {
		n := i % 9
		if f.ID != uint32(i) || len(f.Data) != n+2*boolInt(i == 1) {
			t.Fatalf("frame %d: %+v", i, f)
		}
		for j := 0; j < n; j++ {
			if f.Data[j] != byte(i+j) {
				t.Fatalf("frame %d byte %d: % x", i, j, f.Data)
			}
		}
	}
	if len(kept) != 1000 {
		t.Fatalf("%d frames", len(kept))
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// quickJSON answers true only for text encoding/json accepts, and true for the ASCII text of
// modest nesting that it does.
func TestQuickJSON(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool // what quickJSON answers
	}{
		{`{"longitude":-122.5,"latitude":37.75}`, true},
		{` {"yaw":null,"pitch":0.001,"roll":-1e-7} `, true},
		{`{"state":"alert","method":["visual","sound"],"message":"a \"b\" \\ \/ \u00e9\n"}`, true},
		{`{"count":2,"satellites":[{"id":1,"SNR":4.5E+1},{}]}`, true},
		{"[]", true}, {"{}", true}, {"[ ]", true}, {"{ }", true}, {"[[],{}]", true},
		{"0", true}, {"-0", true}, {"1.5e3", true}, {"true", true}, {"false", true}, {"null", true}, {`""`, true},
		{"\t[1,\r\n2]\n", true},
		{strings.Repeat("[", 64) + strings.Repeat("]", 64), true},
		// malformed
		{"", false}, {" ", false}, {"{", false}, {"[1,]", false}, {`{"a":1,}`, false}, {`{"a"}`, false},
		{`{"a":1 "b":2}`, false}, {`{1:2}`, false}, {"[1 2]", false}, {"01", false}, {"1.", false},
		{".5", false}, {"1e", false}, {"-", false}, {"+1", false}, {"tru", false}, {"nul", false},
		{`"a`, false}, {"\"a\x01\"", false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false},
		{"[1]]", false}, {"{]", false}, {"[}", false}, {"1 2", false}, {"NaN", false},
		// well formed, but left to encoding/json
		{`"é"`, false}, {"\"\xff\"", false}, {strings.Repeat("[", 65) + strings.Repeat("]", 65), false},
	} {
		if got := quickJSON([]byte(c.text)); got != c.ok {
			t.Errorf("%q: %v, want %v", c.text, got, c.ok)
		}
		if c.ok && !json.Valid([]byte(c.text)) {
			t.Errorf("%q: accepted but not valid", c.text)
		}
	}
}

// FuzzQuickJSON holds quickJSON to encoding/json: never true where json.Valid (or UTF-8)
// says no, and for ASCII text nested no deeper than 64, the same answer.
func FuzzQuickJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e-3,true,false,null,"x\u0041\n"]}`, `[]`, `{"a":{}}`, `0`, `"\""`, `[1,]`, "\"\xc3\xa9\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		quick, valid := quickJSON(b), json.Valid(b)
		if quick && (!valid || !utf8.Valid(b)) {
			t.Fatalf("%q accepted, json.Valid %v", b, valid)
		}
		ascii, depth, deepest := true, 0, 0
		for _, c := range b {
			switch {
			case c >= 0x80:
				ascii = false
			case c == '[' || c == '{':
				depth++
				deepest = max(deepest, depth)
			case c == ']' || c == '}':
				depth--
			}
		}
		if ascii && deepest <= 64 && quick != valid {
			t.Fatalf("%q: quick %v, json.Valid %v", b, quick, valid)
		}
	})
}

// PublishJSON and Publish of a json.RawMessage queue the text as it is and refuse what
// Publish always refused, with the same errors; PublishTo takes the quick way too.
func TestPublishJSON(t *testing.T) {
	var errs []error
	var text []byte
	h := start(t, &Plugin{OnInit: func(Info) error {
		text = []byte(`{"longitude":1.5,"latitude":-2}`)
		errs = []error{
			PublishJSON("n.p", text),
			Publish("n.q", json.RawMessage(`{"a":"é"}`)), // the long way
			PublishJSON("n.r", []byte(`[1,`)),
			PublishJSON("n.s", nil),
			PublishJSON("n..t", text),
			PublishJSON("n.u", []byte("\"\xff\"")),
			PublishJSON("n.v", []byte(`"`+strings.Repeat("x", abi.MaxValue)+`"`)),
			PublishTo("vessels.urn:mrn:imo:mmsi:230123456", "n.w", json.RawMessage(`[true]`)),
			PublishTo("vessels.urn:mrn:imo:mmsi:230123456", "n.x", json.RawMessage(`[true`)),
		}
		copy(text, "XXXXXXXX") // the queue holds its own copy
		return nil
	}}, abi.CapSKPublish)
	for i, err := range errs {
		if bad := i >= 2 && i <= 6 || i == 8; (err != nil) != bad || bad && !errors.Is(err, ErrInvalid) {
			t.Errorf("call %d: %v", i, err)
		}
	}
	// The words are those Publish gives through ToValue.
	for i, v := range []json.RawMessage{json.RawMessage(`[1,`), nil, json.RawMessage("\"\xff\"")} {
		_, want := ToValue(v)
		if got := errs[2+[]int{0, 1, 3}[i]]; want == nil || got.Error() != want.Error()+": "+ErrInvalid.Error() {
			t.Errorf("value %q: %v, want %v", v, got, want)
		}
	}
	want := []PathValue{{Path: "n.p", Value: abi.JSON([]byte(`{"longitude":1.5,"latitude":-2}`))},
		{Path: "n.q", Value: abi.JSON([]byte(`{"a":"é"}`))}}
	if !reflect.DeepEqual(h.Published, want) {
		t.Fatalf("published %+v", h.Published)
	}
	if got := h.Contexts["vessels.urn:mrn:imo:mmsi:230123456"]; len(got) != 1 || got[0].Value.Str != "[true]" {
		t.Fatalf("context values %+v", got)
	}
}

// Events are sent through a reused buffer: each arrives as it was sent.
func TestEmitReusesBuffer(t *testing.T) {
	var errs []error
	h := start(t, &Plugin{OnInit: func(Info) error {
		for _, s := range []string{`[1,2,3]`, `{"a":1}`, `"` + strings.Repeat("x", 8000) + `"`, `"` + strings.Repeat("y", 50000) + `"`, `2`} {
			errs = append(errs, EmitJSON("t", []byte(s), false))
		}
		return nil
	}}, abi.CapEvents)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrInvalid) || errs[4] != nil {
		t.Fatalf("errors %v", errs)
	}
	var got []string
	for _, e := range h.SSE {
		got = append(got, string(e.Data))
	}
	if len(got) != 4 || got[0] != `[1,2,3]` || got[1] != `{"a":1}` || len(got[2]) != 8002 || got[3] != `2` {
		t.Fatalf("events %.40q", got)
	}
	if cap(rt.emit) > keepEmit {
		t.Errorf("kept a buffer of %d bytes", cap(rt.emit))
	}
}
