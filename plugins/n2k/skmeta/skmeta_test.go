package skmeta

import "testing"

func TestUnits(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"navigation.headingMagnetic", "rad"},
		{"navigation.speedOverGround", "m/s"},
		{"environment.outside.temperature", "K"},
		{"electrical.batteries.1.voltage", "V"},
		{"electrical.batteries.house.voltage", "V"}, // any instance id
		{"electrical.batteries.1.capacity.stateOfCharge", "ratio"},
		{"propulsion.port.revolutions", "Hz"},
		{"tanks.fuel.0.currentLevel", "ratio"},
		{"electrical.ac.genset.phase.A.current", "A"},
		{"navigation.position", ""},              // an object: no units
		{"electrical.batteries.1", ""},           // a branch
		{"electrical.batteries.1.voltage.x", ""}, // below a leaf
		{"no.such.path", ""},
		{"", ""},
	} {
		if got := Units(c.path); got != c.want {
			t.Errorf("Units(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// The specific pattern wins over a wider one that also matches.
func TestMostSpecificWins(t *testing.T) {
	old := wild
	defer func() { wild = old }()
	wild = []rule{{"a.*.*", "wide"}, {"a.*.c", "narrow"}}
	if got := Units("a.b.c"); got != "narrow" {
		t.Errorf("got %q", got)
	}
	if got := Units("a.b.d"); got != "wide" {
		t.Errorf("got %q", got)
	}
}
