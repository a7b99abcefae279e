package signalk

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/board"
	"devhost/host/clock"
	"devhost/host/health"
	"devhost/host/sk"
)

// The helper: Bearer, Accept, any status is a call, at most 2 in flight, the timeout, the cap.
func TestHTTPHelper(t *testing.T) {
	if HTTPTimeout != 6*time.Second || HTTPBodyCap != 16*1024 || HTTPInFlight != 2 {
		t.Fatal("spec defaults changed")
	}
	p, r := approvedRig(t, func(o *Options) { o.HTTPTimeout = 300 * time.Millisecond })
	p.answer("GET", "/a", 503, `{"x":1}`)
	st, body, err := r.c.HTTP(t.Context(), "GET", "/a", nil)
	if err != nil || st != 503 || string(body) != `{"x":1}` {
		t.Fatalf("503 is a successful call: %d %s %v", st, body, err)
	}
	c := p.calls("GET", "/a")[0]
	if c.Auth != "Bearer tok1" || c.Accept != "application/json" {
		t.Fatalf("headers %+v", c)
	}
	// The cap: 16 KiB passes, one byte more is never parsed.
	p.answer("GET", "/big", 200, strings.Repeat("a", HTTPBodyCap))
	if _, b, err := r.c.HTTP(t.Context(), "GET", "/big", nil); err != nil || len(b) != HTTPBodyCap {
		t.Fatalf("16 KiB: %d %v", len(b), err)
	}
	p.answer("GET", "/big", 200, strings.Repeat("a", HTTPBodyCap+1))
	if st, b, err := r.c.HTTP(t.Context(), "GET", "/big", nil); !errors.Is(err, ErrTruncated) || b != nil || st != 200 {
		t.Fatalf("over the cap: %d %d %v", st, len(b), err)
	}
	// The timeout.
	release := make(chan struct{})
	p.on("GET", "/slow", func(w http.ResponseWriter, _ *http.Request) { <-release })
	// The call's own timeout ends it: the caller's context (a guard against a hang) is live.
	guard, cancelGuard := context.WithTimeout(t.Context(), hangGuard)
	defer cancelGuard()
	if _, _, err := r.c.HTTP(guard, "GET", "/slow", nil); err == nil || guard.Err() != nil {
		t.Fatalf("timeout: %v (the caller's context: %v)", err, guard.Err())
	}
	close(release)
	// At most 2 in flight.
	var inFlight, peak atomic.Int32
	gate := make(chan struct{})
	p.on("GET", "/hold", func(w http.ResponseWriter, _ *http.Request) {
		n := inFlight.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		<-gate
		inFlight.Add(-1)
	})
	r.c.http.timeout = 5 * time.Second
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _, _ = r.c.HTTP(context.Background(), "GET", "/hold", nil) }()
	}
	eventually(t, "two calls in flight", func() bool { return inFlight.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	close(gate)
	wg.Wait()
	if peak.Load() != 2 {
		t.Fatalf("peak in flight %d, want 2", peak.Load())
	}
}

// GET /sk/status carries every documented member; the events carry the same documents.
func TestStatusDocument(t *testing.T) {
	_, r := approvedRig(t, nil)
	rec := httptest.NewRecorder()
	r.c.getStatus(rec, httptest.NewRequest("GET", "/api/v1/sk/status", nil))
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	m := map[string]map[string]any{}
	for _, k := range []string{"server", "token", "ws"} {
		var v map[string]any
		if err := json.Unmarshal(raw[k], &v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		m[k] = v
	}
	for _, k := range []string{"scheme", "host", "port", "self", "source"} {
		if _, ok := m["server"][k]; !ok {
			t.Fatalf("server.%s missing: %s", k, rec.Body)
		}
	}
	for _, k := range []string{"state", "since_s", "next_retry_s", "client_id", "has_token"} {
		if _, ok := m["token"][k]; !ok {
			t.Fatalf("token.%s missing: %s", k, rec.Body)
		}
	}
	if m["token"]["state"] != StateApproved || m["server"]["scheme"] != "http" || m["ws"] == nil {
		t.Fatalf("status %s", rec.Body)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("status cacheable")
	}
	// One connect callback gives both snapshots.
	r.ev.mu.Lock()
	cbs := r.ev.cbs
	r.ev.mu.Unlock()
	if len(cbs) != 1 {
		t.Fatalf("%d connect callbacks", len(cbs))
	}
	if evs := cbs[0](); len(evs) != 2 || evs[0].Name != "sk" || evs[1].Name != "sk_servers" {
		t.Fatalf("snapshots %+v", evs)
	}
	rec = httptest.NewRecorder()
	r.c.getServers(rec, httptest.NewRequest("GET", "/api/v1/sk/servers", nil))
	if rec.Body.String() != "{\"servers\":[]}\n" {
		t.Fatalf("servers %q", rec.Body)
	}
	// The stream's status changes are the sk_ws events.
	n := r.ev.count("sk_ws")
	r.stream.setConnected(true)
	r.c.StreamStatus()
	if r.ev.count("sk_ws") != n+1 {
		t.Fatal("no sk_ws event")
	}
}

// POST /sk/put → 202 through the stream's PUT; GET /sk/put shows the last answer.
func TestPutEndpoints(t *testing.T) {
	_, r := approvedRig(t, nil)
	rec := httptest.NewRecorder()
	r.c.getPut(rec, httptest.NewRequest("GET", "/api/v1/sk/put", nil))
	if !strings.Contains(rec.Body.String(), `"state":"NONE"`) {
		t.Fatalf("before any PUT: %s", rec.Body)
	}
	if rec := postJSON(t, r.c.postPut, `{"path":"electrical.switches.a.state","value": 1 }`); rec.Code != http.StatusAccepted {
		t.Fatalf("POST /sk/put: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	r.c.getPut(rec, httptest.NewRequest("GET", "/api/v1/sk/put", nil))
	if !strings.Contains(rec.Body.String(), `"state":"PENDING"`) || !strings.Contains(rec.Body.String(), `"value":1`) {
		t.Fatalf("pending: %s", rec.Body)
	}
	r.stream.mu.Lock()
	answer := r.stream.answers[0]
	r.stream.mu.Unlock()
	answer(sk.PutAnswer{State: "COMPLETED", StatusCode: 502, Message: "relay stuck"})
	rec = httptest.NewRecorder()
	r.c.getPut(rec, httptest.NewRequest("GET", "/api/v1/sk/put", nil))
	if !strings.Contains(rec.Body.String(), `"statusCode":502`) || !strings.Contains(rec.Body.String(), `"state":"COMPLETED"`) {
		t.Fatalf("answered: %s", rec.Body)
	}
	for _, body := range []string{`{"value":1}`, `{"path":"a..b","value":1}`, `{"path":"a.b"}`, `{"path":"a.b","value":1,"x":2}`, `[1]`} {
		if rec := postJSON(t, r.c.postPut, body); rec.Code != http.StatusBadRequest {
			t.Fatalf("%s: %d", body, rec.Code)
		}
	}
	r.stream.mu.Lock()
	r.stream.putErr = ErrInvalidState
	r.stream.mu.Unlock()
	if rec := postJSON(t, r.c.postPut, `{"path":"a.b","value":true}`); rec.Code != http.StatusConflict {
		t.Fatalf("stream down: %d", rec.Code)
	}
}

// skLinkStalled: network up, the stream worked once, down for sk.stall_s → alarm with the
// reboot flag; cleared when it reconnects or the network goes down.
func TestLinkStalled(t *testing.T) {
	net := make(chan NetEvent, 4)
	_, r := approvedRig(t, func(o *Options) { o.Net = net })
	stalled := func() health.Condition {
		for _, c := range r.hlth.Conditions() {
			if c.Key == KeyLinkStalled {
				return c
			}
		}
		t.Fatal("skLinkStalled has no slot")
		return health.Condition{}
	}
	// Never connected this boot: no alarm however long it stays down.
	r.clk.Advance(time.Hour)
	if stalled().State != health.Normal {
		t.Fatal("alarm before the stream ever worked")
	}
	r.stream.setConnected(true)
	r.c.StreamStatus()
	r.stream.setConnected(false)
	r.c.StreamStatus()
	r.clk.Advance(299 * time.Second)
	if stalled().State != health.Normal {
		t.Fatal("alarm before stall_s")
	}
	r.clk.Advance(time.Second)
	eventually(t, "stall alarm", func() bool { return stalled().State == health.Alarm })
	if !stalled().RebootOnAlarm {
		t.Fatal("skLinkStalled is not fatal")
	}
	net <- NetDown
	eventually(t, "cleared on network down", func() bool { return stalled().State == health.Normal })
	net <- NetUp
	time.Sleep(20 * time.Millisecond)
	r.clk.Advance(299 * time.Second)
	if stalled().State != health.Normal {
		t.Fatal("stall counted from before network-up")
	}
	r.stream.setConnected(true)
	r.c.StreamStatus()
	r.clk.Advance(time.Hour)
	if stalled().State != health.Normal {
		t.Fatal("alarm while connected")
	}
	r.c.mu.Lock()
	n := r.c.connects
	r.c.mu.Unlock()
	if n != 2 {
		t.Fatalf("connects %d", n)
	}
}

// Conditions become Signal K notifications; telemetry goes out every sk.health_s.
func TestNotificationsAndTelemetry(t *testing.T) {
	rssi := -61
	_, r := approvedRig(t, func(o *Options) {
		o.Telemetry = func() Telemetry {
			return Telemetry{Uptime: 90 * time.Second, RSSI: &rssi, WiFiReconnects: 3, ResetReason: "poweron",
				Memory: board.Memory{FreeHeap: 100000, MinFreeHeap: 90000, FreeInternal: 50000, LargestBlock: 30000}}
		}
	})
	if err := r.hlth.Report("netDown", health.Warn, "network down"); err != nil {
		t.Fatal(err)
	}
	find := func(path string) (sk.Value, bool) {
		for _, v := range r.stream.values() {
			if v.Path == path {
				return v, true
			}
		}
		return sk.Value{}, false
	}
	v, ok := find("notifications.dev.dev-ab12.netDown")
	if !ok {
		t.Fatalf("no notification: %+v", r.stream.values())
	}
	var n struct {
		State, Message string
		Method         []string
	}
	if err := json.Unmarshal(v.Value.(json.RawMessage), &n); err != nil || n.State != "warn" || n.Message != "network down" || len(n.Method) != 1 || n.Method[0] != "visual" {
		t.Fatalf("notification %s: %v", v.Value, err)
	}
	if _, ok := find("notifications.dev.dev-ab12.skLinkStalled"); !ok {
		t.Fatal("registered conditions were not replayed")
	}
	if _, ok := find("dev.dev-ab12.uptime"); ok {
		t.Fatal("telemetry before sk.health_s")
	}
	r.clk.Advance(10 * time.Second)
	eventually(t, "telemetry", func() bool { _, ok := find("dev.dev-ab12.resetReason"); return ok })
	want := map[string]any{"uptime": 90.0, "freeHeap": 100000.0, "minFreeHeap": 90000.0, "internalFree": 50000.0,
		"largestBlock": 30000.0, "rssi": -61.0, "wifiReconnects": 3.0, "skReconnects": 0.0, "resetReason": "poweron"}
	for k, w := range want {
		v, ok := find("dev.dev-ab12." + k)
		if !ok || v.Value != w {
			t.Fatalf("%s = %v, want %v", k, v.Value, w)
		}
	}
	// sk.health_s 0 turns it off.
	r.cfg.Set("sk", "health_s", 0)
	time.Sleep(20 * time.Millisecond)
	n0 := len(r.stream.values())
	r.clk.Advance(time.Hour)
	time.Sleep(20 * time.Millisecond)
	if len(r.stream.values()) != n0 {
		t.Fatal("telemetry with sk.health_s 0")
	}
}

// Time fallback: navigation.datetime sets the clock as source sk while unsynced; a better
// source drops the subscription.
func TestTimeFallback(t *testing.T) {
	var wall *clock.Clock
	_, r := approvedRig(t, func(o *Options) {
		wall = clock.New(clock.Options{Clock: o.Clock})
		o.Time = wall
	})
	eventually(t, "subscription", func() bool { return r.stream.sub(PathDatetime) != nil })
	if !r.c.Status().TimeSubscribed {
		t.Fatal("status does not show the time subscription")
	}
	r.stream.sub(PathDatetime)(sk.Delta{Path: PathDatetime, Value: json.RawMessage(`"2026-06-01T10:00:00.000Z"`)})
	now, src, synced := wall.Now()
	if src != clock.SourceSK || !synced || now.Year() != 2026 || now.Month() != 6 {
		t.Fatalf("clock %s %s %v", now, src, synced)
	}
	// Garbage is ignored.
	r.stream.sub(PathDatetime)(sk.Delta{Path: PathDatetime, Value: json.RawMessage(`{"x":1}`)})
	if err := wall.Set(clock.SourceSNTP, time.Date(2026, 6, 1, 10, 0, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "subscription dropped", func() bool { return r.stream.sub(PathDatetime) == nil })
	eventually(t, "status", func() bool { return !r.c.Status().TimeSubscribed })
}

// Publishing before Run is an invalid-state error; bad values are refused.
func TestPublishAPI(t *testing.T) {
	r := newRig(t, nil, nil)
	c, err := New(r.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PublishNumber("a.b", 1); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("before Run: %v", err)
	}
	if err := c.Put("a.b", json.RawMessage("1"), nil); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("PUT before Run: %v", err)
	}
	if err := c.Flush(context.Background()); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("flush before Run: %v", err)
	}
	r.c = nil
	r.opts.Store = r.st
	r.start()
	eventually(t, "started", r.c.started.Load)
	for _, f := range []func() error{
		func() error { return r.c.PublishNumber("a.n", 1.5) },
		func() error { return r.c.PublishString("a.s", "x") },
		func() error { return r.c.PublishBool("a.b", true) },
		func() error { return r.c.PublishJSON("a.j", json.RawMessage(`{ "k" : [1, 2] }`)) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	vals := r.stream.values()
	if len(vals) < 4 || string(vals[len(vals)-1].Value.(json.RawMessage)) != `{"k":[1,2]}` {
		t.Fatalf("values %+v", vals)
	}
	for _, f := range []func() error{
		func() error { return r.c.PublishNumber("a..b", 1) },
		func() error { return r.c.PublishJSON("a.j", json.RawMessage(`{`)) },
		func() error { return r.c.Publish(sk.Value{Path: "a.x", Value: 3}) },
	} {
		if err := f(); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("bad value accepted: %v", err)
		}
	}
}

// Another context's values go to the stream under their context; a context outside the
// grammar, the own vessel's, a root that is not an object and a bad path are refused.
func TestPublishContextAPI(t *testing.T) {
	r := newRig(t, nil, nil)
	r.start()
	eventually(t, "started", r.c.started.Load)
	const ctx = "vessels.urn:mrn:imo:mmsi:230123456"
	if err := r.c.PublishContext(ctx, sk.Value{Path: "navigation.speedOverGround", Value: 3.5},
		sk.Value{Path: "", Value: json.RawMessage(`{"name":"ILMATAR"}`)}); err != nil {
		t.Fatal(err)
	}
	r.stream.mu.Lock()
	got := slices.Clone(r.stream.contexts)
	r.stream.mu.Unlock()
	if !slices.Equal(got, []string{ctx}) {
		t.Fatalf("contexts %v", got)
	}
	for name, err := range map[string]error{
		"self":        r.c.PublishContext("vessels.self", sk.Value{Path: "a.b", Value: 1.0}),
		"no urn":      r.c.PublishContext("vessels.230123456", sk.Value{Path: "a.b", Value: 1.0}),
		"unknown":     r.c.PublishContext("boats.urn:mrn:imo:mmsi:230123456", sk.Value{Path: "a.b", Value: 1.0}),
		"root number": r.c.PublishContext(ctx, sk.Value{Path: "", Value: 1.0}),
		"root array":  r.c.PublishContext(ctx, sk.Value{Path: "", Value: json.RawMessage(`[1]`)}),
		"bad path":    r.c.PublishContext(ctx, sk.Value{Path: "a..b", Value: 1.0}),
		"nan":         r.c.PublishContext(ctx, sk.Value{Path: "a.b", Value: math.NaN()}),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}
