package health

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/host/board"

	"github.com/jonboulle/clockwork"
)

// step advances the fake clock one policy period and runs the tick.
func step(r *Registry, fc *clockwork.FakeClock) {
	fc.Advance(TickInterval)
	r.tick()
}

// TestStrikes walks the last two rows of the state table tick by tick.
func TestStrikes(t *testing.T) {
	var rs recorder[ResetRecord]
	r, fc := newTestRegistry(t, Options{Policy: true, Restart: rs.add})
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")

	step(r, fc)
	if r.strikes != 1 || rs.n() != 0 {
		t.Fatalf("tick 1: strikes %d restarts %d", r.strikes, rs.n())
	}
	step(r, fc)
	if r.strikes != 2 || rs.n() != 0 {
		t.Fatalf("tick 2: strikes %d restarts %d", r.strikes, rs.n())
	}
	// The alarm clears before the third tick: the count resets.
	_ = r.ReportFatal("skLinkStalled", Normal, "")
	step(r, fc)
	if r.strikes != 0 || rs.n() != 0 {
		t.Fatalf("cleared: strikes %d restarts %d", r.strikes, rs.n())
	}
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled again")
	step(r, fc)
	step(r, fc)
	if r.strikes != 2 || rs.n() != 0 {
		t.Fatalf("strikes %d restarts %d before the third consecutive tick", r.strikes, rs.n())
	}
	step(r, fc)
	if rs.n() != 1 {
		t.Fatalf("third consecutive tick: %d restarts, want 1", rs.n())
	}
	if rec := rs.got[0]; rec.Reason != "software" || rec.HealthKey != "skLinkStalled" || rec.Message != "stalled again" {
		t.Fatalf("record %+v", rec)
	}
	// Restart is called once.
	step(r, fc)
	step(r, fc)
	if rs.n() != 1 {
		t.Fatalf("restart called %d times", rs.n())
	}
}

// Strikes count ticks with any flagged alarm, even when the alarming condition changes.
func TestStrikesAcrossConditions(t *testing.T) {
	var rs recorder[ResetRecord]
	r, fc := newTestRegistry(t, Options{Policy: true, Restart: rs.add})
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")
	step(r, fc)
	step(r, fc)
	_ = r.ReportFatal("pluginStalled", Alarm, "stuck")
	_ = r.ReportFatal("skLinkStalled", Normal, "")
	step(r, fc)
	if rs.n() != 1 || rs.got[0].HealthKey != "pluginStalled" {
		t.Fatalf("records %+v", rs.got)
	}
}

func TestNeverRestarts(t *testing.T) {
	cases := []struct {
		name   string
		policy bool
		report func(r *Registry)
	}{
		{"flagged warn", true, func(r *Registry) { _ = r.ReportFatal("skLinkStalled", Warn, "w") }},
		{"unflagged alarm", true, func(r *Registry) { _ = r.Report("skCertificate", Alarm, "cert") }},
		{"drill alarm", true, func(r *Registry) {
			_ = r.ApplyDrill(Drill{Key: "test.x", State: Alarm, Message: "m", TTL: 300 * time.Second})
		}},
		{"policy disabled", false, func(r *Registry) { _ = r.ReportFatal("skLinkStalled", Alarm, "a") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rs recorder[ResetRecord]
			r, fc := newTestRegistry(t, Options{Policy: c.policy, Restart: rs.add})
			c.report(r)
			for range 10 {
				step(r, fc)
			}
			if rs.n() != 0 || r.strikes != 0 {
				t.Fatalf("restarts %d strikes %d", rs.n(), r.strikes)
			}
			if d := r.Snapshot(); d.Worst == Normal && c.name != "drill alarm" {
				t.Fatalf("condition not recorded: %+v", d)
			}
		})
	}
}

func TestResetRecord(t *testing.T) {
	wall := time.Date(2025, 6, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	mem := board.Memory{FreeHeap: 100 * KiB, FreeInternal: 60 * KiB, LargestBlock: 30 * KiB}
	var mu sync.Mutex
	var rs recorder[ResetRecord]
	r, fc := newTestRegistry(t, Options{
		Policy:    true,
		Restart:   rs.add,
		Memory:    func() board.Memory { mu.Lock(); defer mu.Unlock(); return mem },
		WallClock: func() (time.Time, bool) { return wall, true },
		Uptime:    func() time.Duration { return 3*time.Hour + 1500*time.Millisecond },
	})
	set := func(m board.Memory) { mu.Lock(); mem = m; mu.Unlock() }

	set(board.Memory{FreeHeap: 30 * KiB, FreeInternal: 11 * KiB, LargestBlock: 9 * KiB})
	step(r, fc) // lowMemory alarm, strike 1
	set(board.Memory{FreeHeap: 35 * KiB, FreeInternal: 11*KiB + 5, LargestBlock: 7 * KiB})
	step(r, fc) // strike 2
	set(board.Memory{FreeHeap: 36 * KiB, FreeInternal: 11*KiB + 9, LargestBlock: 7*KiB + 3})
	step(r, fc) // strike 3
	if rs.n() != 1 {
		t.Fatalf("restarts %d", rs.n())
	}
	want := ResetRecord{
		Reason:             "software",
		HealthKey:          "lowMemory",
		Message:            msgInternalAlarm + "; " + msgBlockAlarm,
		MinFreeHeapBefore:  30 * KiB,
		MinInternalBefore:  11 * KiB,
		LargestBlockBefore: 7*KiB + 3,
		UptimeBeforeS:      10801, // whole seconds, rounded down
	}
	got := rs.got[0]
	if got.At == nil || !got.At.Equal(wall) || got.At.Location() != time.UTC {
		t.Fatalf("at %v, want %v in UTC", got.At, wall)
	}
	got.At = nil
	if got != want {
		t.Fatalf("record\n got %+v\nwant %+v", got, want)
	}

	// Without a set clock `at` is nil.
	var rs2 recorder[ResetRecord]
	r2, fc2 := newTestRegistry(t, Options{Policy: true, Restart: rs2.add,
		WallClock: func() (time.Time, bool) { return time.Time{}, false }})
	_ = r2.ReportFatal("skLinkStalled", Alarm, "x")
	for range 3 {
		step(r2, fc2)
	}
	if rs2.n() != 1 || rs2.got[0].At != nil || rs2.got[0].UptimeBeforeS != 30 {
		t.Fatalf("record %+v", rs2.got)
	}
}

func TestMemoryThresholds(t *testing.T) {
	const ok = 200 * KiB
	cases := []struct {
		name  string
		mem   board.Memory
		state State
		msg   string
		flag  bool
	}{
		{"all fine", board.Memory{FreeHeap: ok, FreeInternal: ok, LargestBlock: ok}, Normal, "", false},
		{"heap at 40 KiB", board.Memory{FreeHeap: 40 * KiB, FreeInternal: ok, LargestBlock: ok}, Normal, "", false},
		{"heap below 40 KiB", board.Memory{FreeHeap: 40*KiB - 1, FreeInternal: ok, LargestBlock: ok}, Warn, msgHeapWarn, false},
		{"internal at 20 KiB", board.Memory{FreeHeap: ok, FreeInternal: 20 * KiB, LargestBlock: ok}, Normal, "", false},
		{"internal below 20 KiB", board.Memory{FreeHeap: ok, FreeInternal: 20*KiB - 1, LargestBlock: ok}, Warn, msgInternalWarn, false},
		{"both warn", board.Memory{FreeHeap: 40*KiB - 1, FreeInternal: 20*KiB - 1, LargestBlock: ok}, Warn, msgHeapWarn + "; " + msgInternalWarn, false},
		{"internal at 12 KiB", board.Memory{FreeHeap: ok, FreeInternal: 12 * KiB, LargestBlock: ok}, Warn, msgInternalWarn, false},
		{"internal below 12 KiB", board.Memory{FreeHeap: ok, FreeInternal: 12*KiB - 1, LargestBlock: ok}, Alarm, msgInternalAlarm, true},
		{"block at 8 KiB", board.Memory{FreeHeap: ok, FreeInternal: ok, LargestBlock: 8 * KiB}, Normal, "", false},
		{"block below 8 KiB", board.Memory{FreeHeap: ok, FreeInternal: ok, LargestBlock: 8*KiB - 1}, Alarm, msgBlockAlarm, true},
		{"alarm beats warn", board.Memory{FreeHeap: 1, FreeInternal: 12*KiB - 1, LargestBlock: 8*KiB - 1}, Alarm, msgInternalAlarm + "; " + msgBlockAlarm, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, fc := newTestRegistry(t, Options{Memory: func() board.Memory { return c.mem }})
			step(r, fc)
			got := mustCond(t, r, KeyLowMemory)
			if got.State != c.state || got.Message != c.msg || got.RebootOnAlarm != c.flag {
				t.Fatalf("lowMemory %+v, want %s %q flag %v", got, c.state, c.msg, c.flag)
			}
		})
	}
}

func TestMemoryTrough(t *testing.T) {
	cases := []struct {
		internal int64
		state    State
	}{
		{10 * KiB, Normal},
		{10*KiB - 1, Warn},
	}
	for _, c := range cases {
		var mu sync.Mutex
		mem := board.Memory{FreeHeap: 100 * KiB, FreeInternal: 50 * KiB, LargestBlock: 30 * KiB}
		get := func() board.Memory { mu.Lock(); defer mu.Unlock(); return mem }
		r, fc := newTestRegistry(t, Options{Memory: get})
		var s recorder[Condition]
		_ = r.AddSink(s.add)
		// New claimed both memory slots; the sink's replay saw them.
		if s.n() != 2 || mustCond(t, r, KeyMemoryTrough).State != Normal {
			t.Fatalf("replay %+v", s.got)
		}
		mu.Lock()
		mem.FreeInternal = c.internal
		mu.Unlock()
		step(r, fc)
		got := mustCond(t, r, KeyMemoryTrough)
		if got.State != c.state || got.RebootOnAlarm {
			t.Fatalf("internal %d: memoryTrough %+v, want %s", c.internal, got, c.state)
		}
		if c.state != Warn {
			continue
		}
		if got.Message != msgTrough || strings.Contains(got.Message, "10239") {
			t.Fatalf("message %q must name the threshold", got.Message)
		}
		// Memory recovers: lowMemory returns to normal, memoryTrough stays.
		mu.Lock()
		mem.FreeInternal = 50 * KiB
		mu.Unlock()
		calls := s.n()
		step(r, fc)
		step(r, fc)
		if mustCond(t, r, KeyLowMemory).State != Normal || mustCond(t, r, KeyMemoryTrough).State != Warn {
			t.Fatalf("after recovery: %+v", r.Conditions())
		}
		if s.n() != calls+1 { // only lowMemory's return to normal
			t.Fatalf("sink calls %d, want %d", s.n(), calls+1)
		}
		if lw := r.LowWater(); lw.FreeInternal != 10*KiB-1 || lw.FreeHeap != 100*KiB {
			t.Fatalf("low water %+v", lw)
		}
	}
}

func TestWatchLimits(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	if _, err := r.Watch("", time.Second); !errors.Is(err, ErrBadTask) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := r.Watch("a", 0); !errors.Is(err, ErrBadTask) {
		t.Fatalf("zero timeout: %v", err)
	}
	if _, err := r.Watch("a", TaskWatchdogTimeout+time.Millisecond); !errors.Is(err, ErrBadTask) {
		t.Fatalf("timeout over the task watchdog: %v", err)
	}
	var tasks []*Task
	for i := range MaxTasks {
		tk, err := r.Watch(string(rune('a'+i)), TaskWatchdogTimeout)
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
		tasks = append(tasks, tk)
	}
	if _, err := r.Watch("z", time.Second); !errors.Is(err, ErrTooManyTasks) {
		t.Fatalf("ninth task: %v", err)
	}
	if _, err := r.Watch("a", time.Second); err == nil {
		t.Fatal("duplicate name accepted")
	}
	tasks[0].Close()
	tasks[0].Close()
	if _, err := r.Watch("a", time.Second); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if c := mustCond(t, r, KeyTaskStalled); c.State != Normal {
		t.Fatalf("taskStalled %+v", c)
	}

	full, _ := newTestRegistry(t, Options{MaxConditions: 1})
	_ = full.Report("netDown", Warn, "x")
	if _, err := full.Watch("a", time.Second); !errors.Is(err, ErrFull) {
		t.Fatalf("no slot for taskStalled: %v", err)
	}
}

func TestTaskStalled(t *testing.T) {
	r, fc := newTestRegistry(t, Options{})
	a, _ := r.Watch("sk", 5*time.Second)
	b, _ := r.Watch("n2k", 15*time.Second)

	step(r, fc) // t=10: sk stalled (10 > 5), n2k fine
	c := mustCond(t, r, KeyTaskStalled)
	if c.State != Alarm || !c.RebootOnAlarm || !strings.Contains(c.Message, `"sk"`) {
		t.Fatalf("t=10: %+v", c)
	}
	step(r, fc) // t=20: both stalled
	if c := mustCond(t, r, KeyTaskStalled); !strings.Contains(c.Message, `"sk"`) || !strings.Contains(c.Message, "+1 more") {
		t.Fatalf("t=20: %+v", c)
	}
	a.Kick()
	step(r, fc) // t=30: sk kicked at 20 (10 > 5 again), so still stalled with n2k
	a.Kick()
	b.Kick()
	fc.Advance(4 * time.Second)
	r.tick() // both within their timeouts
	if c := mustCond(t, r, KeyTaskStalled); c.State != Normal || c.RebootOnAlarm {
		t.Fatalf("after every task kicked: %+v", c)
	}
	// Exactly at the timeout the task is still on time.
	fc.Advance(1 * time.Second)
	a.Kick()
	fc.Advance(5 * time.Second)
	b.Kick()
	r.tick()
	if c := mustCond(t, r, KeyTaskStalled); c.State != Normal {
		t.Fatalf("kick exactly at the timeout: %+v", c)
	}
	// A closed task no longer counts.
	fc.Advance(10 * time.Second)
	a.Close()
	b.Close()
	r.tick()
	if c := mustCond(t, r, KeyTaskStalled); c.State != Normal {
		t.Fatalf("closed tasks: %+v", c)
	}
}

// runRegistry starts Run and returns a channel fed after every tick.
func runRegistry(t *testing.T, r *Registry) <-chan struct{} {
	t.Helper()
	ticks := make(chan struct{}, 16)
	r.onTick = func() { ticks <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return ticks
}

func waitTick(t *testing.T, ticks <-chan struct{}) {
	t.Helper()
	select {
	case <-ticks:
	case <-time.After(hangGuard):
		t.Fatal("no tick")
	}
}

// TestRunPolicy checks Run ticks every 10 s and restarts exactly at the third tick.
func TestRunPolicy(t *testing.T) {
	restarted := make(chan ResetRecord, 2)
	fc := clockwork.NewFakeClock()
	r := New(Options{Clock: fc, Policy: true, Restart: func(rec ResetRecord) { restarted <- rec }})
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")
	ticks := runRegistry(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 1); err != nil { // the ticker
		t.Fatal(err)
	}
	fc.Advance(TickInterval - time.Millisecond)
	select {
	case <-ticks:
		t.Fatal("ticked before 10 s")
	case <-time.After(20 * time.Millisecond):
	}
	fc.Advance(time.Millisecond)
	waitTick(t, ticks)
	fc.Advance(TickInterval)
	waitTick(t, ticks)
	if len(restarted) != 0 {
		t.Fatal("restarted at the second tick")
	}
	fc.Advance(TickInterval)
	waitTick(t, ticks)
	select {
	case rec := <-restarted:
		if rec.HealthKey != "skLinkStalled" || rec.UptimeBeforeS != 30 {
			t.Fatalf("record %+v", rec)
		}
	default:
		t.Fatal("no restart at the third tick")
	}
}

// TestTaskWatchdog checks the 30 s task watchdog calls Panic once per stall, independent of
// the policy.
func TestTaskWatchdog(t *testing.T) {
	panics := make(chan string, 4)
	fc := clockwork.NewFakeClock()
	r := New(Options{Clock: fc, Policy: false, Panic: func(task string) { panics <- task }})
	ticks := runRegistry(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = fc.BlockUntilContext(ctx, 1) // the ticker; the watchdog timer is stopped with no task

	a, _ := r.Watch("sk", 5*time.Second)
	b, _ := r.Watch("n2k", 25*time.Second)
	if err := fc.BlockUntilContext(ctx, 2); err != nil { // ticker + armed watchdog
		t.Fatal(err)
	}
	noPanic := func(when string) {
		t.Helper()
		select {
		case p := <-panics:
			t.Fatalf("%s: panic for %q", when, p)
		case <-time.After(20 * time.Millisecond):
		}
	}
	for i := range 2 { // t=10, t=20; n2k keeps kicking
		fc.Advance(TickInterval)
		waitTick(t, ticks)
		b.Kick()
		if i == 0 && mustCond(t, r, KeyTaskStalled).State != Alarm {
			t.Fatal("taskStalled not raised at the first tick")
		}
	}
	noPanic("t=20")
	fc.Advance(TickInterval - time.Millisecond) // t=29.999
	noPanic("just before 30 s")
	fc.Advance(time.Millisecond) // t=30
	waitTick(t, ticks)
	select {
	case p := <-panics:
		if p != "sk" {
			t.Fatalf("panic for %q", p)
		}
	case <-time.After(hangGuard):
		t.Fatal("no task watchdog panic at 30 s")
	}
	// Once per stall: no second panic while sk stays stalled.
	fc.Advance(TickInterval)
	waitTick(t, ticks)
	noPanic("same stall")
	// Kicked again, then silent for 30 s: a new stall, a new panic. n2k stalls at the same time.
	a.Kick()
	b.Kick()
	fc.Advance(TaskWatchdogTimeout)
	got := map[string]bool{}
	for range 2 {
		select {
		case p := <-panics:
			got[p] = true
		case <-time.After(hangGuard):
			t.Fatalf("panics %v", got)
		}
	}
	if !got["sk"] || !got["n2k"] {
		t.Fatalf("panics %v", got)
	}
}

func TestDefaultPanic(t *testing.T) {
	r := New(Options{Clock: clockwork.NewFakeClock()})
	defer func() {
		msg, _ := recover().(string)
		if !strings.HasPrefix(msg, "task_wdt:") || !strings.Contains(msg, `"sk"`) {
			t.Fatalf("panic %q", msg)
		}
	}()
	r.panicFn("sk")
	t.Fatal("no panic")
}

// A stalled watched task is a flagged alarm: with the policy on it restarts the device.
func TestTaskStalledRestarts(t *testing.T) {
	var rs recorder[ResetRecord]
	r, fc := newTestRegistry(t, Options{Policy: true, Restart: rs.add})
	if _, err := r.Watch("sk", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	step(r, fc)
	step(r, fc)
	if rs.n() != 0 || r.strikes != 2 {
		t.Fatalf("restarts %d strikes %d", rs.n(), r.strikes)
	}
	step(r, fc)
	if rs.n() != 1 || rs.got[0].HealthKey != KeyTaskStalled || !strings.Contains(rs.got[0].Message, `"sk"`) {
		t.Fatalf("records %+v", rs.got)
	}
}

// hangGuard bounds the waits of these tests. Each waits on a condition; the bound only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute
