package skmap

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"sort"
	"testing"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
)

// refCase is one message (after its sender's address claim where the mapping needs one)
// with the values and $source that canboatjs 3.20.0 + n2k-signalk 4.6.0 produce for it.
type refCase struct {
	Lines  []string        `json:"lines"`
	Values []Value         `json:"values"`
	Source json.RawMessage `json:"source"`
}

func mapLines(t *testing.T, lines []string) *Delta {
	t.Helper()
	p, _ := input.NewParser(input.Analyzer)
	m := New()
	var last *Delta
	for _, l := range lines {
		r, err := p.Parse(l)
		if err != nil || r.Msg == nil {
			t.Fatalf("%q: %v", l, err)
		}
		d, err := decode.Decode(*r.Msg)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		last = m.Map(d, r.Msg.Data, "2026-01-01T00:00:00.000Z")
	}
	return last
}

// normal makes a value comparable: JSON round trip, numbers rounded to 1e-9 relative.
func normal(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return round(out)
}

func round(v any) any {
	switch x := v.(type) {
	case float64:
		if x == 0 {
			return x
		}
		e := math.Pow(10, 9-math.Ceil(math.Log10(math.Abs(x))))
		return math.Round(x*e) / e
	case map[string]any:
		for k, e := range x {
			x[k] = round(e)
		}
	case []any:
		for i, e := range x {
			x[i] = round(e)
		}
	}
	return v
}

func TestReferenceCases(t *testing.T) {
	b, err := os.ReadFile("testdata/reference_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	covered := map[uint32]bool{}
	for _, tc := range cases {
		var src struct {
			PGN uint32 `json:"pgn"`
		}
		_ = json.Unmarshal(tc.Source, &src)
		covered[src.PGN] = true
		t.Run(tc.Lines[len(tc.Lines)-1][25:40], func(t *testing.T) {
			d := mapLines(t, tc.Lines)
			if d == nil {
				t.Fatal("no delta")
			}
			u := d.Updates[0]
			values := u.Values
			// The reference writes a value without a path for a pressure source it has no
			// path for; such values are left out here.
			var want []Value
			for _, v := range tc.Values {
				if v.Path != "" {
					want = append(want, v)
				}
			}
			if g, w := normal(t, values), normal(t, want); !reflect.DeepEqual(g, w) {
				t.Errorf("values\n got %v\nwant %v", g, w)
			}
			if g, w := normal(t, u.Source), normal(t, tc.Source); !reflect.DeepEqual(g, w) {
				t.Errorf("source\n got %v\nwant %v", g, w)
			}
		})
	}
	// Every PGN of the table with a reference case in the logs is covered; the others have
	// their own tests below and in table_test.go, and cmd/devctl's
	// TestN2KDecodeMatchesReference compares every one with the reference on
	// testdata/logs/mapped-pgns.log.
	var missing []int
	for _, p := range PGNs() {
		if !covered[p] && !synthetic[p] {
			missing = append(missing, int(p))
		}
	}
	sort.Ints(missing)
	t.Logf("PGNs without a case from the logs: %v", missing)
}

// synthetic lists the PGNs tested with hand-built messages (TestSynthetic).
var synthetic = map[uint32]bool{127237: true, 127503: true, 127504: true, 127509: true, 127513: true, 127497: true, 127507: true, 127750: true, 130577: true, 129283: true, 129284: true, 127245: true, 127488: true, 127493: true, 127751: true, 127744: true, 127745: true,
	127746: true, 129291: true, 130316: true, 65006: true, 65007: true, 65008: true, 65009: true, 65010: true,
	65011: true, 65015: true, 65016: true, 65017: true, 65019: true, 65020: true, 65021: true, 65022: true, 65023: true,
	65024: true, 65028: true, 65029: true, 65030: true}

// TestSynthetic covers the rules the logs do not reach, with fields as the decoder gives
// them; the expected paths follow n2k-signalk's mapping files.
func TestSynthetic(t *testing.T) {
	five := 5
	claimed := &srcState{canName: "c03c8c0011351024", deviceInstance: &five}
	tests := []struct {
		pgn    uint32
		fields map[string]any
		state  *srcState
		want   []Value
	}{
		{127250, map[string]any{"heading": 1.0, "deviation": 0.01, "reference": "Magnetic"}, nil,
			[]Value{{"navigation.headingMagnetic", 1.0}, {"navigation.magneticDeviation", 0.01}}},
		{128267, map[string]any{"depth": 3.0, "offset": -0.5}, nil,
			[]Value{{"environment.depth.belowTransducer", 3.0}, {"environment.depth.transducerToKeel", -0.5}, {"environment.depth.belowKeel", 2.5}}},
		{130306, map[string]any{"windSpeed": 5.0, "windAngle": 4.0, "reference": "True (boat referenced)"}, nil,
			[]Value{{"environment.wind.speedTrue", 5.0}, {"environment.wind.angleTrueWater", 4.0}}},
		{130306, map[string]any{"windSpeed": 5.0, "windAngle": 4.0, "reference": "Apparent"}, nil,
			[]Value{{"environment.wind.speedApparent", 5.0}, {"environment.wind.angleApparent", 4.0 - 2*math.Pi}}},
		{127245, map[string]any{"instance": 0.0, "position": -0.1}, nil, []Value{{"steering.rudderAngle", -0.1}}},
		{127488, map[string]any{"instance": "Single Engine or Dual Engine Port", "speed": 785.8, "tiltTrim": 50.0, "boostPressure": 1000.0}, nil,
			[]Value{{"propulsion.port.revolutions", 785.8 / 60}, {"propulsion.port.drive.trimState", 0.5}, {"propulsion.port.boostPressure", 1000.0}}},
		{127493, map[string]any{"instance": 1.0, "transmissionGear": "Forward", "oilPressure": 200000.0, "oilTemperature": 330.0, "discreteStatus1": 2.0}, nil,
			[]Value{{"propulsion.1.transmission.oilTemperature", 330.0}, {"propulsion.1.transmission.gear", "Forward"},
				{"propulsion.1.transmission.oilPressure", 200000.0},
				{"notifications.propulsion.1.transmission.checkTransmission", Notification{"normal", []string{"visual"}, "Check 1 Engine is Normal"}},
				{"notifications.propulsion.1.transmission.overTemperature", Notification{"alarm", []string{"visual", "sound"}, "1 Transmission Over Temperature"}},
				{"notifications.propulsion.1.transmission.lowOilPressure", Notification{"normal", []string{"visual"}, "1 Transmission Low Oil Pressure is Normal"}},
				{"notifications.propulsion.1.transmission.lowOilLevel", Notification{"normal", []string{"visual"}, "1 Transmission Low Oil Level is Normal"}},
				{"notifications.propulsion.1.transmission.sailDrive", Notification{"normal", []string{"visual"}, "1 Transmission Sail Drive is Normal"}}}},
		{127751, map[string]any{"connectionNumber": 1.0, "dcVoltage": 12.5, "dcCurrent": 3.0}, nil,
			[]Value{{"electrical.dc.9.1.voltage", 12.5}, {"electrical.dc.9.1.current", 3.0}}},
		{127744, map[string]any{"connectionNumber": 0.0, "acRmsCurrent": 2.0, "power": 230.0}, nil,
			[]Value{{"electrical.ac.9.0.phase.A.power", 230.0}, {"electrical.ac.9.0.phase.A.current", 2.0}}},
		{127745, map[string]any{"connectionNumber": 0.0, "acRmsCurrent": 2.0}, nil, []Value{{"electrical.ac.9.0.phase.B.current", 2.0}}},
		{127746, map[string]any{"connectionNumber": 0.0, "power": 5.0}, nil, []Value{{"electrical.ac.9.0.phase.C.power", 5.0}}},
		{129291, map[string]any{"setReference": "True", "set": 1.0, "drift": 0.5}, nil, []Value{{"environment.current", Current{1.0, 0.5}}}},
		{129291, map[string]any{"setReference": "Unknown", "set": 1.0}, nil, nil},
		{127497, map[string]any{"instance": 0.0, "tripFuelUsed": 12.0, "fuelRateAverage": 3.5}, nil,
			[]Value{{"propulsion.0.trip.fuelUsed", 0.012}, {"propulsion.0.trip.fuelRate.average", 0.0035}}},
		{127507, map[string]any{"instance": 1.0, "operatingState": "Bulk", "chargeMode": "Standalone mode", "enabled": "On", "equalizationPending": "Off"}, nil,
			[]Value{{"electrical.chargers.1.operatingState", "bulk"}, {"electrical.chargers.1.chargeMode", "standalone mode"},
				{"electrical.chargers.1.enabled", true}, {"electrical.chargers.1.equalizationPending", false},
				{"electrical.chargers.1.equalizationTimeRemaining", nil}}},
		{127750, map[string]any{"connectionNumber": 2.0, "operatingState": "Float", "lowDcVoltageState": "Good"}, nil,
			[]Value{{"electrical.converter.9.2.operatingState", "float"}, {"electrical.converter.9.2.lowDCVoltageState", "good"}}},
		{130577, map[string]any{"cogReference": "True", "cog": 1.0, "sog": 2.0, "set": 0.5, "drift": 0.3}, nil,
			[]Value{{"navigation.courseOverGroundTrue", 1.0}, {"navigation.speedOverGround", 2.0}, {"environment.current", Current{0.5, 0.3}}}},
		{129283, map[string]any{"navigationTerminated": "No", "xte": 12.0}, nil, nil}, // no 129284 seen yet
		{129283, map[string]any{"navigationTerminated": "No", "xte": 12.0}, &srcState{courseType: "GreatCircle"},
			[]Value{{"navigation.courseGreatCircle.crossTrackError", 12.0}}},
		{129284, map[string]any{"calculationType": "Rhumbline", "courseBearingReference": "True", "distanceToWaypoint": 1000.0,
			"bearingPositionToDestinationWaypoint": 1.5, "destinationLatitude": 14.1, "destinationLongitude": -60.9,
			"etaDate": "2026.01.01", "etaTime": "01:00:00"}, nil,
			[]Value{{"navigation.courseRhumbline.nextPoint.distance", 1000.0}, {"navigation.courseRhumbline.nextPoint.bearingTrue", 1.5},
				{"navigation.courseRhumbline.nextPoint.position", Position{Longitude: -60.9, Latitude: 14.1}},
				{"navigation.courseRhumbline.nextPoint.timeToGo", 3600.0}}},
		{127237, map[string]any{"headingReference": "Magnetic", "headingToSteerCourse": 1.2}, nil,
			[]Value{{"steering.autopilot.target.headingMagnetic", 1.2}}},
		{127509, map[string]any{"instance": 0.0, "operatingState": "Invert", "inverterEnable": "Off"}, nil,
			[]Value{{"electrical.inverters.0.operatingState", "invert"}, {"electrical.inverters.0.enabled", false}}},
		{127513, map[string]any{"instance": 1.0, "batteryType": "Flooded", "supportsEqualization": "Yes", "nominalVoltage": "12V",
			"chemistry": "Li", "capacity": 200.0, "peukertExponent": 1.25}, nil,
			[]Value{{"electrical.batteries.1.batteryType", "flooded"}, {"electrical.batteries.1.supportsEqualization", true},
				{"electrical.batteries.1.nominalVoltage", "12V"}, {"electrical.batteries.1.chemistry", "li"},
				{"electrical.batteries.1.capacity.nominal", 720000.0}, {"electrical.batteries.1.peukertExponent", 1.25}}},
		{130316, map[string]any{"instance": 2.0, "source": "Inside Temperature", "temperature": 293.15}, nil,
			[]Value{{"environment.inside.2.temperature", 293.15}}},
		{130316, map[string]any{"instance": 1.0, "source": "Exhaust Gas Temperature", "temperature": 500.0}, nil,
			[]Value{{"propulsion.1.exhaustTemperature", 500.0}}},
		{127505, map[string]any{"instance": 1.0, "type": "Fuel", "level": 50.0, "capacity": 200.0}, nil,
			[]Value{{"tanks.fuel.1.currentLevel", 0.5}, {"tanks.fuel.1.capacity", 0.2}}},
	}
	for p := uint32(65006); p <= 65030; p++ {
		if p == 65018 {
			continue
		}
		kind, phase := "ac", ""
		off := p - 65005
		if p > 65018 {
			kind, off = "generators", p-65018
		}
		switch {
		case off <= 9:
			phase = []string{"phase.C", "phase.B", "phase.A"}[(off-1)/3]
		case off == 12:
			phase = "average"
		default:
			phase = "total"
		}
		prefix := "electrical." + kind + ".5." + phase
		switch (off - 1) % 3 {
		case 0:
			tests = append(tests, struct {
				pgn    uint32
				fields map[string]any
				state  *srcState
				want   []Value
			}{p, map[string]any{"reactivePower": 10.0, "powerFactorLagging": "Leading"}, claimed,
				[]Value{{prefix + ".reactivePower", 10.0}, {prefix + ".powerFactorLagging", "leading"}}})
		case 1:
			tests = append(tests, struct {
				pgn    uint32
				fields map[string]any
				state  *srcState
				want   []Value
			}{p, map[string]any{"realPower": 100.0}, claimed, []Value{{prefix + ".realPower", 100.0}}})
		case 2:
			tests = append(tests, struct {
				pgn    uint32
				fields map[string]any
				state  *srcState
				want   []Value
			}{p, map[string]any{"acRmsCurrent": 3.0, "acFrequency": 60.0}, claimed,
				[]Value{{prefix + ".frequency", 60.0}, {prefix + ".current", 3.0}}})
		}
	}
	for _, tc := range tests {
		m := New()
		if tc.state != nil {
			m.state[9] = tc.state
		}
		d := m.Map(&decode.Decoded{Header: decode.Header{PGN: tc.pgn, Src: 9}, ByName: tc.fields}, nil, "2026-01-01T00:00:00.000Z")
		var got []Value
		if d != nil {
			got = d.Updates[0].Values
		}
		if g, w := normal(t, got), normal(t, tc.want); !reflect.DeepEqual(g, w) {
			t.Errorf("%d %v:\n got %v\nwant %v", tc.pgn, tc.fields, g, w)
		}
	}
}

func TestUnclaimedAC(t *testing.T) {
	// Without the address claim, the Maretron AC PGNs map to nothing.
	d := mapLines(t, []string{"2016-02-28T19:57:02.827Z,3,65027,196,255,8,7e,00,7e,00,04,3c,05,00"})
	if d != nil {
		t.Errorf("unclaimed source mapped: %+v", d)
	}
}

func TestEngineNotifications(t *testing.T) {
	d := New().Map(&decode.Decoded{Header: decode.Header{PGN: 127489, Src: 9}, ByName: map[string]any{
		"instance": "Single Engine or Dual Engine Port", "discreteStatus1": []string{"Over Temperature"}}}, nil, "2026-01-01T00:00:00.000Z")
	if d == nil {
		t.Fatal("no delta")
	}
	got := map[string]Notification{}
	for _, v := range d.Updates[0].Values {
		n, ok := v.Value.(Notification)
		if !ok {
			t.Errorf("%s: %v (values the message lacks are left out)", v.Path, v.Value)
			continue
		}
		got[v.Path] = n
	}
	if len(got) != 16 {
		t.Errorf("%d notifications, want the 16 of discreteStatus1", len(got))
	}
	if n := got["notifications.propulsion.port.overTemperature"]; n.State != "alarm" || n.Message != "Port Engine Over Temperature" {
		t.Errorf("overTemperature: %+v", n)
	}
	if n := got["notifications.propulsion.port.checkEngine"]; n.State != "normal" || n.Message != "Check Port Engine is Normal" {
		t.Errorf("checkEngine: %+v", n)
	}
}

func TestACLines(t *testing.T) {
	for _, tc := range []struct {
		pgn   uint32
		first string
		base  string
	}{{127503, "acceptability", "electrical.ac."}, {127504, "waveform", "electrical.inverters."}} {
		d := &decode.Decoded{Header: decode.Header{PGN: tc.pgn, Src: 9}, ByName: map[string]any{"instance": 3.0},
			List: []decode.Group{{ByName: map[string]any{"line": "Line 1", tc.first: "Good", "voltage": 230.0}}, {ByName: map[string]any{"line": 1.0, "current": 4.0}}}}
		delta := New().Map(d, nil, "2026-01-01T00:00:00.000Z")
		if delta == nil {
			t.Fatalf("%d: no delta", tc.pgn)
		}
		want := []Value{{tc.base + "3.A." + tc.first, "Good"}, {tc.base + "3.A.voltage", 230.0}, {tc.base + "3.B.current", 4.0}}
		if g, w := normal(t, delta.Updates[0].Values), normal(t, want); !reflect.DeepEqual(g, w) {
			t.Errorf("%d:\n got %v\nwant %v", tc.pgn, g, w)
		}
	}
}

// Three engines reported by one source, in turn and again: each message keeps its own
// engine's paths (the memos per engine of a source are not mixed up or lost past two).
func TestThreeEnginesOneSource(t *testing.T) {
	m := New()
	names := []any{"Single Engine or Dual Engine Port", "Dual Engine Starboard", 2.0}
	want := []string{"propulsion.port.revolutions", "propulsion.starboard.revolutions", "propulsion.2.revolutions"}
	for round := range 2 {
		for i, inst := range names {
			d := m.Map(&decode.Decoded{Header: decode.Header{PGN: 127488, Src: 9},
				ByName: map[string]any{"instance": inst, "speed": 600.0 * float64(i+1)}}, nil, "2026-01-01T00:00:00.000Z")
			if d == nil || len(d.Updates[0].Values) == 0 || d.Updates[0].Values[0].Path != want[i] || d.Updates[0].Values[0].Value != 10.0*float64(i+1) {
				t.Fatalf("round %d, engine %v: %+v", round, inst, d)
			}
		}
	}
	if n := len(m.state[9].engines); n != 3 {
		t.Fatalf("%d engine memos for the source, want 3", n)
	}
}
