package health

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"
)

// recorder keeps every call of the callback add stands for (a sink, Options.Restart).
type recorder[T any] struct {
	mu  sync.Mutex
	got []T
}

func (s *recorder[T]) add(v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, v)
}

func (s *recorder[T]) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func (s *recorder[T]) last() T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

func newTestRegistry(t *testing.T, opts Options) (*Registry, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClock()
	if opts.Clock == nil {
		opts.Clock = fc
	}
	return New(opts), fc
}

func mustCond(t *testing.T, r *Registry, key string) Condition {
	t.Helper()
	for _, c := range r.Conditions() {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("no condition %q in %+v", key, r.Conditions())
	return Condition{}
}

// TestLevelTriggered walks the first two rows of the state table, report by report.
func TestLevelTriggered(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	var s recorder[Condition]
	if err := r.AddSink(s.add); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		state     State
		msg       string
		wantCalls int // cumulative
	}{
		{Warn, "a", 1},   // new key: sinks called
		{Warn, "a", 1},   // same state and message: unchanged
		{Warn, "b", 2},   // new message
		{Alarm, "b", 3},  // new state
		{Alarm, "b", 3},  // same again
		{Normal, "", 4},  // back to normal
		{Normal, "", 4},  // normal again: nothing
		{Normal, "x", 5}, // a new message in normal is a change too
	}
	for i, st := range steps {
		if err := r.Report("netDown", st.state, st.msg); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := s.n(); got != st.wantCalls {
			t.Fatalf("step %d (%s %q): sink calls %d, want %d", i, st.state, st.msg, got, st.wantCalls)
		}
		c := mustCond(t, r, "netDown")
		if c.State != st.state || c.Message != st.msg {
			t.Fatalf("step %d: condition %+v", i, c)
		}
		if s.last() != c {
			t.Fatalf("step %d: sink saw %+v, table has %+v", i, s.last(), c)
		}
	}
}

// TestFlagFollowsPath checks that the plain path never carries the flag and that a report of
// the same state and message leaves even the flag alone.
func TestFlagFollowsPath(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	var s recorder[Condition]
	_ = r.AddSink(s.add)
	if err := r.ReportFatal("skLinkStalled", Alarm, "down"); err != nil {
		t.Fatal(err)
	}
	if c := mustCond(t, r, "skLinkStalled"); !c.RebootOnAlarm {
		t.Fatalf("fatal path lost the flag: %+v", c)
	}
	_ = r.Report("skLinkStalled", Alarm, "down") // level-triggered: nothing at all changes
	if c := mustCond(t, r, "skLinkStalled"); !c.RebootOnAlarm || s.n() != 1 {
		t.Fatalf("same report changed the condition: %+v, %d calls", c, s.n())
	}
	_ = r.Report("skLinkStalled", Alarm, "still down")
	if c := mustCond(t, r, "skLinkStalled"); c.RebootOnAlarm || s.n() != 2 {
		t.Fatalf("plain report carried the flag: %+v, %d calls", c, s.n())
	}
}

func TestSinkReplayAndCap(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	_ = r.Report("netDown", Warn, "down")
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")
	_ = r.Report("tlsMemory", Normal, "")

	var first recorder[Condition]
	if err := r.AddSink(first.add); err != nil {
		t.Fatal(err)
	}
	want := r.Conditions()
	if len(first.got) != 3 {
		t.Fatalf("replay gave %d calls, want 3", len(first.got))
	}
	for i := range want {
		if first.got[i] != want[i] {
			t.Fatalf("replay %d = %+v, want %+v (oldest first)", i, first.got[i], want[i])
		}
	}
	// A change reaches every sink, and a later sink is replayed the latest state only.
	_ = r.Report("netDown", Normal, "")
	var second recorder[Condition]
	_ = r.AddSink(second.add)
	if first.n() != 4 || second.n() != 3 || second.got[0].State != Normal {
		t.Fatalf("first %d calls, second %+v", first.n(), second.got)
	}
	_ = r.Report("netDown", Warn, "again")
	if first.n() != 5 || second.n() != 4 {
		t.Fatalf("fan-out: first %d, second %d", first.n(), second.n())
	}

	var extra [2]recorder[Condition]
	for i := range extra {
		if err := r.AddSink(extra[i].add); err != nil {
			t.Fatalf("sink %d: %v", i+3, err)
		}
	}
	var fifth recorder[Condition]
	if err := r.AddSink(fifth.add); !errors.Is(err, ErrSinksFull) {
		t.Fatalf("fifth sink: %v, want ErrSinksFull", err)
	}
	_ = r.Report("netDown", Normal, "")
	if fifth.n() != 0 || extra[1].n() != 4 {
		t.Fatalf("refused sink called %d times; fourth sink %d", fifth.n(), extra[1].n())
	}
}

// A sink that reports must not deadlock; its report reaches every sink after it returns.
func TestSinkMayReport(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	var s recorder[Condition]
	_ = r.AddSink(func(c Condition) {
		if c.Key == "netDown" && c.State == Warn {
			_ = r.Report("flowConfig", Warn, "echo")
		}
	})
	_ = r.AddSink(s.add)
	_ = r.Report("netDown", Warn, "down")
	if s.n() != 2 || s.got[0].Key != "netDown" || s.got[1].Key != "flowConfig" {
		t.Fatalf("calls %+v", s.got)
	}
}

func TestTableFull(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	var s recorder[Condition]
	_ = r.AddSink(s.add)
	for i := range MaxConditions {
		if err := r.Report(fmt.Sprintf("c%d", i), Warn, "x"); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	if err := r.Report("c12", Warn, "x"); !errors.Is(err, ErrFull) {
		t.Fatalf("13th key: %v, want ErrFull", err)
	}
	// A key keeps its slot even when normal: clearing one frees nothing.
	_ = r.Report("c0", Normal, "")
	if err := r.Report("c12", Normal, ""); !errors.Is(err, ErrFull) {
		t.Fatalf("after clearing c0: %v, want ErrFull", err)
	}
	// Known keys still report.
	if err := r.Report("c3", Alarm, "y"); err != nil {
		t.Fatal(err)
	}
	if s.n() != MaxConditions+2 || len(r.Conditions()) != MaxConditions {
		t.Fatalf("%d calls, %d conditions", s.n(), len(r.Conditions()))
	}
}

func TestReportRejects(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	cases := []struct {
		key   string
		state State
		msg   string
		want  error
	}{
		{"", Warn, "", ErrBadKey},
		{strings.Repeat("k", MaxKeyLen+1), Warn, "", ErrBadKey},
		{"has space", Warn, "", ErrBadKey},
		{"ctl\x01", Warn, "", ErrBadKey},
		{"bad\xff", Warn, "", ErrBadKey},
		{"test.reserved", Warn, "", ErrBadKey},
		{KeyLowMemory, Normal, "", ErrBadKey},
		{KeyMemoryTrough, Warn, "", ErrBadKey},
		{KeyTaskStalled, Alarm, "", ErrBadKey},
		{"ok", "fatal", "", ErrBadState},
		{"ok", Warn, strings.Repeat("m", MaxMessageLen+1), ErrBadMessage},
	}
	for _, c := range cases {
		if err := r.ReportFatal(c.key, c.state, c.msg); !errors.Is(err, c.want) {
			t.Errorf("Report(%q, %q, %d bytes) = %v, want %v", c.key, c.state, len(c.msg), err, c.want)
		}
	}
	if n := len(r.Conditions()); n != 0 {
		t.Fatalf("refused reports took %d slots", n)
	}
	if err := r.Report(strings.Repeat("k", MaxKeyLen), Warn, strings.Repeat("m", MaxMessageLen)); err != nil {
		t.Fatalf("longest key and message refused: %v", err)
	}
}

func TestDocument(t *testing.T) {
	r, _ := newTestRegistry(t, Options{Policy: true})
	d := r.Snapshot()
	if d.Worst != Normal || d.Fatal != nil || d.Conditions == nil || len(d.Conditions) != 0 || d.Truncated != 0 {
		t.Fatalf("empty document %+v", d)
	}
	_ = r.Report("netDown", Warn, "down")
	_ = r.Report("skCertificate", Alarm, "cert") // unflagged alarm: worst, not fatal
	d = r.Snapshot()
	if d.Worst != Alarm || d.Fatal != nil {
		t.Fatalf("worst %s fatal %v", d.Worst, d.Fatal)
	}
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")
	_ = r.ReportFatal("pluginStalled", Alarm, "t")
	d = r.Snapshot()
	if d.Fatal == nil || *d.Fatal != "skLinkStalled" {
		t.Fatalf("fatal %v, want the oldest flagged alarm skLinkStalled", d.Fatal)
	}
	if d.Conditions[0].Key != "netDown" || d.Conditions[3].Key != "pluginStalled" {
		t.Fatalf("order %+v", d.Conditions)
	}
	// Flagged but only warn: not fatal.
	_ = r.ReportFatal("skLinkStalled", Warn, "w")
	_ = r.ReportFatal("pluginStalled", Normal, "")
	if d = r.Snapshot(); d.Fatal != nil || d.Worst != Alarm {
		t.Fatalf("fatal %v worst %s", d.Fatal, d.Worst)
	}

	// Policy disabled: nothing is fatal.
	off, _ := newTestRegistry(t, Options{Policy: false})
	_ = off.ReportFatal("skLinkStalled", Alarm, "stalled")
	if d := off.Snapshot(); d.Fatal != nil || d.Worst != Alarm {
		t.Fatalf("policy off: fatal %v", d.Fatal)
	}
}

// The response carries at most 32 conditions; worst and fatal still see the rest.
func TestDocumentTruncated(t *testing.T) {
	r, _ := newTestRegistry(t, Options{MaxConditions: 40, Policy: true})
	for i := range 32 {
		_ = r.Report(fmt.Sprintf("c%02d", i), Normal, "")
	}
	if d := r.Snapshot(); len(d.Conditions) != 32 || d.Truncated != 0 {
		t.Fatalf("32 conditions: %d carried, truncated %d", len(d.Conditions), d.Truncated)
	}
	_ = r.Report("c32", Warn, "w")
	_ = r.ReportFatal("c33", Alarm, "a")
	d := r.Snapshot()
	if len(d.Conditions) != 32 || d.Truncated != 2 {
		t.Fatalf("34 conditions: %d carried, truncated %d", len(d.Conditions), d.Truncated)
	}
	if d.Conditions[31].Key != "c31" || d.Worst != Alarm || d.Fatal == nil || *d.Fatal != "c33" {
		t.Fatalf("last carried %s worst %s fatal %v", d.Conditions[31].Key, d.Worst, d.Fatal)
	}
	for i := 34; i < 40; i++ {
		if err := r.Report(fmt.Sprintf("c%02d", i), Normal, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Report("c40", Normal, ""); !errors.Is(err, ErrFull) {
		t.Fatalf("41st key in a 40-slot table: %v", err)
	}
}
