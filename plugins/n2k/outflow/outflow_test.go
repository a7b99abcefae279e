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

func TestLimiterLatestWins(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	l := Limiter{Interval: ms(100)}
	steps := []struct {
		at     int
		path   string
		v      float64
		passes bool
	}{
		{0, "a", 1, true},
		{10, "b", 1, true}, // each path has its own interval
		{30, "a", 2, false},
		{60, "a", 3, false}, // replaces 2
		{99, "a", 4, false}, // replaces 3
		{100, "a", 5, true}, // its interval passed: out at once, the held 4 superseded
		{150, "a", 6, false},
	}
	for _, s := range steps {
		if got := l.Offer(s.path, s.v, ms(s.at)); got != s.passes {
			t.Fatalf("at %d ms %s=%v: passes %v, want %v", s.at, s.path, s.v, got, s.passes)
		}
	}
	if d := l.Due(ms(199)); d != nil {
		t.Fatalf("due before the interval: %v", d)
	}
	if d := l.Due(ms(200)); !reflect.DeepEqual(d, []Held{{"a", 6.0}}) {
		t.Fatalf("due %v", d)
	}
	// Sent at 200: the next value waits for 300.
	if l.Offer("a", 7.0, ms(250)) || l.Pending() != 1 {
		t.Fatal("a value 50 ms after a late send passed")
	}
	if d := l.Due(ms(300)); !reflect.DeepEqual(d, []Held{{"a", 7.0}}) {
		t.Fatalf("due %v", d)
	}
	if l.Pending() != 0 || l.Due(ms(1000)) != nil {
		t.Fatal("something still held")
	}
}

func TestLimiterOff(t *testing.T) {
	var l Limiter
	for i := range 5 {
		if !l.Offer("a", i, 0) {
			t.Fatal("a zero interval held a value")
		}
	}
	if l.Due(time.Hour) != nil {
		t.Fatal("due with no interval")
	}
}
