package outflow

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOverrides(t *testing.T) {
	o, bad := ParseOverrides(`[
		{"from":"electrical.batteries.1","to":"electrical.batteries.house"},
		{"from":"electrical.batteries.1.capacity","to":"electrical.batteries.house.bank"},
		{"from":"propulsion.0","to":"propulsion.port"},
		{"from":"tanks.fuel.0.currentLevel","to":"tanks.fuel.main.level"}
	]`)
	if len(bad) != 0 || o.Len() != 4 {
		t.Fatalf("rules %d, bad %v", o.Len(), bad)
	}
	for _, c := range []struct{ in, want string }{
		{"electrical.batteries.1.voltage", "electrical.batteries.house.voltage"},
		{"electrical.batteries.1", "electrical.batteries.house"},
		{"electrical.batteries.1.capacity.stateOfCharge", "electrical.batteries.house.bank.stateOfCharge"}, // the longest wins
		{"electrical.batteries.10.voltage", "electrical.batteries.10.voltage"},                             // whole segments only
		{"electrical.batteries.2.voltage", "electrical.batteries.2.voltage"},
		{"propulsion.0.revolutions", "propulsion.port.revolutions"},
		{"tanks.fuel.0.currentLevel", "tanks.fuel.main.level"},
		{"tanks.fuel.0.capacity", "tanks.fuel.0.capacity"},
	} {
		for range 2 { // the second time from the cache
			if got := o.Path(c.in); got != c.want {
				t.Errorf("%s → %s, want %s", c.in, got, c.want)
			}
		}
	}
	var none Overrides
	if none.Path("a.b") != "a.b" {
		t.Error("the zero value renames")
	}
}

func TestOverridesBadRows(t *testing.T) {
	for _, c := range []struct {
		text, why string
		good      int
	}{
		{``, "", 0},
		{`[]`, "", 0},
		{`{"from":"a"}`, "not a table", 0},
		{`[{"from":"a.b","to":""}]`, "not Signal K paths", 0},
		{`[{"from":"a..b","to":"c"}]`, "not Signal K paths", 0},
		{`[{"from":"a.b c","to":"c"}]`, "not Signal K paths", 0},
		{`[{"from":"a.b","to":"c"},{"from":"a.b","to":"d"}]`, "from repeated", 1},
		{`[{"from":" a.b ","to":"c"}]`, "", 1},
	} {
		o, bad := ParseOverrides(c.text)
		if o.Len() != c.good {
			t.Errorf("%s: %d rules, want %d", c.text, o.Len(), c.good)
		}
		if c.why == "" && len(bad) != 0 || c.why != "" && (len(bad) != 1 || !strings.Contains(bad[0].Error(), c.why)) {
			t.Errorf("%s: errors %v, want one naming %q", c.text, bad, c.why)
		}
	}
	rows := make([]string, MaxOverrides+1)
	for i := range rows {
		rows[i] = `{"from":"a.` + strings.Repeat("x", i+1) + `","to":"b"}`
	}
	if o, bad := ParseOverrides("[" + strings.Join(rows, ",") + "]"); o.Len() != MaxOverrides || len(bad) != 1 {
		t.Errorf("%d rules, %v", o.Len(), bad)
	}
}

// at is a time n milliseconds into a test.
func at(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// on is the stream of path from source src.
func on(path, src string) Stream[string] { return Stream[string]{Path: path, Source: src} }

// step offers the value v of path from src at the time at, which passes or is held.
type step struct {
	at        int
	path, src string
	v         float64
	passes    bool
}

// offer plays steps on l.
func offer(t *testing.T, l *Limiter[string], steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := l.Offer(on(s.path, s.src), s.v, at(s.at)); got != s.passes {
			t.Fatalf("at %d ms %s from %s = %v: passes %v, want %v", s.at, s.path, s.src, s.v, got, s.passes)
		}
	}
}

func TestLimiterLatestWins(t *testing.T) {
	l := Limiter[string]{Interval: at(100)}
	offer(t, &l, []step{
		{0, "a", "7", 1, true},
		{10, "b", "7", 1, true}, // each path has its own interval
		{30, "a", "7", 2, false},
		{60, "a", "7", 3, false}, // replaces 2
		{99, "a", "7", 4, false}, // replaces 3
		{100, "a", "7", 5, true}, // its interval passed: out at once, the held 4 superseded
		{150, "a", "7", 6, false},
	})
	if d := l.Due(at(199)); d != nil {
		t.Fatalf("due before the interval: %v", d)
	}
	if d := l.Due(at(200)); !reflect.DeepEqual(d, []Held[string]{{on("a", "7"), 6.0}}) {
		t.Fatalf("due %v", d)
	}
	// Sent at 200: the next value waits for 300.
	if l.Offer(on("a", "7"), 7.0, at(250)) || l.Pending() != 1 {
		t.Fatal("a value 50 ms after a late send passed")
	}
	if d := l.Due(at(300)); !reflect.DeepEqual(d, []Held[string]{{on("a", "7"), 7.0}}) {
		t.Fatalf("due %v", d)
	}
	if l.Pending() != 0 || l.Due(at(1000)) != nil {
		t.Fatal("something still held")
	}
}

// Two senders of one path are two streams: neither holds the other back, and each one's
// latest value goes out when its interval ends.
func TestLimiterPerSource(t *testing.T) {
	l := Limiter[string]{Interval: at(100)}
	const pos = "navigation.position"
	offer(t, &l, []step{
		{0, pos, "35", 1, true},
		{1, pos, "36", 10, true}, // another sender of the same path: its own interval
		{20, pos, "35", 2, false},
		{21, pos, "36", 11, false},
		{40, pos, "36", 12, false}, // replaces 11, not 2
		{60, pos, "35", 3, false},  // replaces 2
		{101, pos, "36", 13, true}, // 36's interval passed; 35's held 3 is still due
	})
	want := []Held[string]{{on("navigation.position", "35"), 3.0}}
	if d := l.Due(at(101)); !reflect.DeepEqual(d, want) {
		t.Fatalf("due %v, want %v", d, want)
	}
	// Both held again: out together, a path's streams in the order their values came.
	l.Offer(on("navigation.position", "36"), 14.0, at(150))
	l.Offer(on("navigation.position", "35"), 4.0, at(160))
	l.Offer(on("navigation.courseOverGroundTrue", "35"), 0.5, at(0))
	want = []Held[string]{{on("navigation.position", "36"), 14.0}, {on("navigation.position", "35"), 4.0}}
	if d := l.Due(at(201)); !reflect.DeepEqual(d, want) {
		t.Fatalf("due %v, want %v", d, want)
	}
}

// The streams remembered stay within MaxStreams: quiet ones are forgotten when room is
// needed, and a new stream while all are active passes without a limit.
func TestLimiterBounded(t *testing.T) {
	l := Limiter[int]{Interval: at(100)}
	for i := range MaxStreams {
		if !l.Offer(Stream[int]{"p", i}, i, at(0)) {
			t.Fatalf("stream %d held at its first value", i)
		}
	}
	l.Offer(Stream[int]{"p", 0}, "held", at(50)) // one stream with a value held
	// All active within the interval: a new stream passes, untracked.
	if !l.Offer(Stream[int]{"p", MaxStreams}, 1, at(60)) || !l.Offer(Stream[int]{"p", MaxStreams}, 2, at(61)) ||
		l.Tracked() != MaxStreams || l.Untracked() != 2 {
		t.Fatalf("tracked %d, untracked %d", l.Tracked(), l.Untracked())
	}
	// An interval after the last look the quiet streams are forgotten; the one holding a
	// value stays.
	if !l.Offer(Stream[int]{"p", MaxStreams}, 3, at(160)) || l.Tracked() != 2 {
		t.Fatalf("after the interval: tracked %d", l.Tracked())
	}
	if l.Offer(Stream[int]{"p", MaxStreams}, 4, at(170)) {
		t.Error("the new stream is not limited once tracked")
	}
	if d := l.Due(at(260)); len(d) != 2 || d[0].Value != "held" || d[1].Value != 4 {
		t.Errorf("due %v", d)
	}
}

func TestLimiterOff(t *testing.T) {
	var l Limiter[string]
	for i := range 5 {
		if !l.Offer(on("a", ""), i, 0) {
			t.Fatal("a zero interval held a value")
		}
	}
	if l.Due(time.Hour) != nil {
		t.Fatal("due with no interval")
	}
}
