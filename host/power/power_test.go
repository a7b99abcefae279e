package power

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

type cfg map[string]any

func (c cfg) String(ns, k string) string { s, _ := c[ns+"."+k].(string); return s }
func (c cfg) Int(ns, k string) int       { i, _ := c[ns+"."+k].(int); return i }

func cycleCfg() cfg {
	return cfg{"power.mode": "cycle", "power.interval_s": 300, "power.window_s": 300, "power.awake_max_s": 30,
		"power.publish_ms": 1500, "power.flush_ms": 3000}
}

// facts are the rule inputs a row sets.
type facts struct {
	unconfirmed, busy, netUp, streamOn, conn bool
}

func (f *facts) inputs(withStream bool) Inputs {
	in := Inputs{Unconfirmed: func() bool { return f.unconfirmed }, UpdateBusy: func() bool { return f.busy },
		NetUp: func() bool { return f.netUp }}
	if withStream {
		in.Stream = &Stream{Enabled: func() bool { return f.streamOn }, Connected: func() bool { return f.conn }}
	}
	return in
}

// TestRuleTable walks the spec's table in order: each row sets the facts that make it the
// first match, and every row above it is shown not to match.
func TestRuleTable(t *testing.T) {
	timerWake := Record{WakeCount: 4, AwakeMS: 1234}.Encode()
	rows := []struct {
		name     string
		mode     string
		reason   string
		rtc      []byte
		f        facts
		sk       bool
		uptime   time.Duration
		settle   time.Duration // time the network/stream have been up at `uptime`
		hold     bool
		decision string
		why      string
	}{
		{name: "mode off", mode: "off", f: facts{unconfirmed: true}, decision: DecisionOff, why: WhyOff},
		{name: "unconfirmed", mode: "cycle", f: facts{unconfirmed: true, busy: true}, uptime: time.Hour, decision: DecisionAwake, why: WhyUnconfirmed},
		{name: "update in progress", mode: "cycle", f: facts{busy: true}, uptime: time.Hour, decision: DecisionAwake, why: WhyOTA},
		{name: "window after power-on", mode: "cycle", reason: "poweron", uptime: 299 * time.Second, decision: DecisionAwake, why: WhyWindow},
		{name: "window after panic", mode: "cycle", reason: "panic", rtc: timerWake, uptime: time.Second, decision: DecisionAwake, why: WhyWindow},
		{name: "deadline after power-on", mode: "cycle", reason: "poweron", uptime: 330 * time.Second, f: facts{netUp: true}, hold: true, decision: DecisionSleep, why: WhyDeadline},
		{name: "deadline after a timer wake beats a hold", mode: "cycle", reason: "deepsleep", rtc: timerWake, uptime: 30 * time.Second, f: facts{netUp: true}, hold: true, decision: DecisionSleep, why: WhyDeadline},
		{name: "network down", mode: "cycle", reason: "deepsleep", rtc: timerWake, uptime: time.Second, decision: DecisionAwake, why: WhyNetwork},
		{name: "stream not connected", mode: "cycle", reason: "deepsleep", rtc: timerWake, sk: true, f: facts{netUp: true, streamOn: true}, uptime: 5 * time.Second, settle: 5 * time.Second, decision: DecisionAwake, why: WhyStream},
		{name: "publishing (stream)", mode: "cycle", reason: "deepsleep", rtc: timerWake, sk: true, f: facts{netUp: true, streamOn: true, conn: true}, uptime: 5 * time.Second, settle: 1499 * time.Millisecond, decision: DecisionAwake, why: WhyPublishing},
		{name: "publishing (no Signal K: from network-up)", mode: "cycle", reason: "deepsleep", rtc: timerWake, f: facts{netUp: true}, uptime: 5 * time.Second, settle: time.Second, decision: DecisionAwake, why: WhyPublishing},
		{name: "streaming disabled skips the stream row", mode: "cycle", reason: "deepsleep", rtc: timerWake, sk: true, f: facts{netUp: true}, uptime: 5 * time.Second, settle: 2 * time.Second, decision: DecisionSleep, why: WhyDone},
		{name: "hold", mode: "cycle", reason: "deepsleep", rtc: timerWake, sk: true, f: facts{netUp: true, streamOn: true, conn: true}, uptime: 5 * time.Second, settle: 2 * time.Second, hold: true, decision: DecisionAwake, why: WhyHold},
		{name: "done", mode: "cycle", reason: "deepsleep", rtc: timerWake, sk: true, f: facts{netUp: true, streamOn: true, conn: true}, uptime: 5 * time.Second, settle: 1500 * time.Millisecond, decision: DecisionSleep, why: WhyDone},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			clk := clockwork.NewFakeClock()
			c := cycleCfg()
			c["power.mode"] = r.mode
			f := r.f
			cy := New(Options{Clock: clk, Config: c, Inputs: f.inputs(r.sk), ResetReason: r.reason, RTC: r.rtc})
			if r.hold {
				defer cy.Hold("app")()
			}
			clk.Advance(r.uptime - r.settle)
			cy.observe()
			clk.Advance(r.settle)
			st := cy.Status()
			if st.Decision != r.decision || st.Why != r.why {
				t.Fatalf("decision %s why %s, want %s %s", st.Decision, st.Why, r.decision, r.why)
			}
		})
	}
}

func TestWakeCountAndRTC(t *testing.T) {
	c := cycleCfg()
	cases := []struct {
		name      string
		reason    string
		rtc       []byte
		timerWake bool
		count     uint32
	}{
		{"power-on starts at 0", "poweron", Record{WakeCount: 7}.Encode(), false, 0},
		{"timer wake continues", "deepsleep", Record{WakeCount: 7, AwakeMS: 900}.Encode(), true, 8},
		{"damaged record", "deepsleep", append(Record{WakeCount: 7}.Encode()[:19], 0), false, 0},
		{"no record", "deepsleep", nil, false, 0},
	}
	for _, cs := range cases {
		cy := New(Options{Clock: clockwork.NewFakeClock(), Config: c, ResetReason: cs.reason, RTC: cs.rtc})
		st := cy.Status()
		if st.TimerWake != cs.timerWake || st.WakeCount != cs.count || (cs.timerWake && (st.LastAwakeMS == nil || *st.LastAwakeMS != 900)) {
			t.Errorf("%s: %+v", cs.name, st)
		}
	}
}

// TestGoingToSleepInOrder: a timer wake with nothing left to do (publish_ms 0) flushes the
// stream for flush_ms, pauses, and sleeps for interval_s with the counter in RTC memory.
func TestGoingToSleepInOrder(t *testing.T) {
	clk := clockwork.NewFakeClock()
	c := cycleCfg()
	c["power.flush_ms"], c["power.publish_ms"] = 2000, 0
	f := &facts{netUp: true, streamOn: true, conn: true}
	in := f.inputs(true)
	var mu sync.Mutex
	var order []string
	flushed := make(chan struct{})
	in.Stream.Flush = func(ctx context.Context) error {
		if dl, ok := ctx.Deadline(); !ok || dl.Sub(clk.Now()) != 2*time.Second {
			t.Errorf("flush deadline %v %v, want flush_ms from now", dl, ok)
		}
		mu.Lock()
		order = append(order, "flush")
		mu.Unlock()
		close(flushed)
		return nil
	}
	slept := make(chan Record, 1)
	var interval atomic.Int64
	cy := New(Options{Clock: clk, Config: c, Inputs: in, ResetReason: "deepsleep", RTC: Record{WakeCount: 2}.Encode(),
		Sleep: func(d time.Duration, rtc []byte) {
			mu.Lock()
			order = append(order, "sleep")
			mu.Unlock()
			interval.Store(int64(d))
			r, ok := Decode(rtc)
			if !ok {
				t.Error("undecodable record")
			}
			slept <- r
		}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); cy.Run(ctx) }()
	<-flushed
	r := advanceUntil(clk, slept)
	<-done
	if r.WakeCount != 3 || time.Duration(interval.Load()) != 300*time.Second {
		t.Fatalf("record %+v interval %v", r, time.Duration(interval.Load()))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "flush" || order[1] != "sleep" {
		t.Fatalf("order %v", order)
	}
}

func TestSleepNow(t *testing.T) {
	clk := clockwork.NewFakeClock()
	f := &facts{unconfirmed: true}
	slept := make(chan Record, 1)
	cy := New(Options{Clock: clk, Config: cycleCfg(), Inputs: f.inputs(false), ResetReason: "poweron",
		Sleep: func(_ time.Duration, rtc []byte) { r, _ := Decode(rtc); slept <- r }})
	if err := cy.SleepNow(); err != ErrUnconfirmed {
		t.Fatalf("sleep-now while unconfirmed: %v", err)
	}
	f.unconfirmed, f.busy = false, true
	if err := cy.SleepNow(); err != ErrUpdating {
		t.Fatalf("sleep-now while updating: %v", err)
	}
	f.busy = false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); cy.Run(ctx) }()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// Inside the window, the application's own schedule still sleeps.
	if err := cy.SleepNow(); err != nil {
		t.Fatal(err)
	}
	advanceUntil(clk, slept)
	<-done
	if st := cy.Status(); st.Decision != DecisionSleep {
		t.Fatalf("status %+v", st)
	}
}

func TestHoldsCountedAndReleasedOnce(t *testing.T) {
	cy := New(Options{Clock: clockwork.NewFakeClock(), Config: cycleCfg()})
	r1, r2 := cy.Hold("app"), cy.Hold("app")
	r3 := cy.Hold("n2k")
	if h := cy.Status().Holds; h.Total != 3 || h.By["app"] != 2 {
		t.Fatalf("holds %+v", h)
	}
	r1()
	r1()
	r3()
	if h := cy.Status().Holds; h.Total != 1 || h.By["app"] != 1 || len(h.By) != 1 {
		t.Fatalf("holds %+v", h)
	}
	r2()
}

func TestPowerDocument(t *testing.T) {
	cy := New(Options{Clock: clockwork.NewFakeClock(), Config: cycleCfg(), ResetReason: "poweron"})
	release := cy.Hold(PluginOwner("n2k"))
	defer release()
	rec := httptest.NewRecorder()
	cy.Routes()[0].Handler(rec, httptest.NewRequest("GET", "/power", nil))
	var doc map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mode", "decision", "why", "timer_wake", "wake_count", "last_awake_ms", "interval_s", "uptime_ms", "deadline_ms", "holds"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("no %q in %s", k, rec.Body.String())
		}
	}
	if doc["deadline_ms"].(float64) != 330000 || doc["why"] != WhyWindow {
		t.Fatalf("document %s", rec.Body.String())
	}
	// The holds name the plugin that holds.
	if h, _ := json.Marshal(doc["holds"]); string(h) != `{"by":{"plugin:n2k":1},"total":1}` {
		t.Fatalf("holds %s", h)
	}
}

// advanceUntil moves the fake clock on by the pause until the cycle slept: the pause timer is
// armed by the cycle's goroutine at a moment the test cannot see.
func advanceUntil(clk *clockwork.FakeClock, slept <-chan Record) Record {
	for {
		select {
		case r := <-slept:
			return r
		case <-time.After(time.Millisecond):
			clk.Advance(pause)
		}
	}
}
