package skmap

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"devhost/plugins/n2k/decode"
)

// The names as the npm camelcase package (6.3.0) gives them.
func TestCamelCase(t *testing.T) {
	for in, want := range map[string]string{
		"Helm 1": "helm1", "Red/Black": "red/black", "Low boat speed": "lowBoatSpeed", "unknown57": "unknown57",
		"  foo-bar_baz ": "fooBarBaz", "No GPS fix": "noGpsFix", "WP Arrival": "wpArrival",
		"Auto, compass commanded": "auto,CompassCommanded", "ABCDef": "abcDef", "fooBar": "fooBar", "a 1b": "a1B",
		"x": "x", "": "", "GPS+GLONASS": "gps+glonass", "Heading 10 deg": "heading10Deg",
	} {
		if got := camelCase(in); got != want {
			t.Errorf("camelCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// mapFields maps one message given as decoded fields from source 9 at a fixed time.
func mapFields(m *Mapper, p uint32, id string, fields map[string]any) *Delta {
	return m.Map(&decode.Decoded{Header: decode.Header{PGN: p, Src: 9}, ID: id, ByName: fields}, nil, "2026-01-01T00:00:00.000Z")
}

// Manufacturers' PGNs the shipped and generated logs cannot check against the reference
// (see reference-differences.json, "uncovered"): fields as canboatjs decodes them.
func TestProprietary(t *testing.T) {
	simrad := func(key string, v any) map[string]any {
		return map[string]any{"manufacturerCode": "Simrad", "industryCode": "Marine Industry", "displayGroup": "Group 1", "key": key, "value": v}
	}
	tests := []struct {
		pgn    uint32
		id     string
		fields map[string]any
		want   []Value
	}{
		{130845, "simnetKeyValue", simrad("Backlight level", 60.0), []Value{{"electrical.displays.navico.group1.brightness", 0.6}}},
		{130845, "simnetKeyValue", simrad("Night mode", 4.0), []Value{{"electrical.displays.navico.group1.nightMode.state", 1.0}}},
		{130845, "simnetKeyValue", simrad("Night mode", 2.0), []Value{{"electrical.displays.navico.group1.nightMode.state", 0.0}}},
		{130845, "simnetKeyValue", simrad("Night mode color", 4.0), []Value{{"electrical.displays.navico.group1.nightModeColor", "magenta"}}},
		{130845, "simnetKeyValue", simrad("Night mode color", 9.0), []Value{{"electrical.displays.navico.group1.nightModeColor", "unknown"}}},
		{130845, "simnetKeyValue", simrad("Other key", 9.0), nil},
		{130850, "simnetAlarm", map[string]any{"alarm": "Low boat speed"}, []Value{{"notifications.lowBoatSpeed",
			TimedNotification{Message: "Low boat speed", Method: []string{"visual"}, State: "warning", at: ptr("2026-01-01T00:00:00.000Z")}}}},
		{130850, "simnetAlarm", map[string]any{"alarm": 77.0}, []Value{{"notifications.unknown77",
			TimedNotification{Message: "Unknown Simnet Alarm 77", Method: []string{"visual"}, State: "warning", at: ptr("2026-01-01T00:00:00.000Z")}}}},
		{130850, "simnetApCommand", map[string]any{"alarm": "Low boat speed"}, nil},
		{65305, "simnetPilotMode", map[string]any{"mode": []string{"Standby", "Wind"}}, []Value{{"steering.autopilot.state", "wind"}}},
		{65305, "simnetPilotMode", map[string]any{}, []Value{{"steering.autopilot.state", "route"}}},
		{65305, "simnetPilotMode", map[string]any{"mode": []string{}}, nil},
		{65379, "seatalkPilotMode", map[string]any{"pilotMode": "Vane, Wind Mode"}, []Value{{"steering.autopilot.state", "wind"}}},
		{65379, "seatalkPilotMode", map[string]any{"pilotMode": 5.0, "subMode": 5.0}, []Value{{"steering.autopilot.state", "standby"}}},
		{65288, "seatalkAlarm", map[string]any{"alarmStatus": "Alarm condition met and not silenced", "alarmId": 200.0, "alarmGroup": "Instrument"},
			[]Value{{"notifications.instrument.unknown200", TimedNotification{Message: "Unknown Seatalk Alarm 200",
				Method: []string{"visual", "sound"}, State: "alarm", at: ptr("2026-01-01T00:00:00.000Z")}}}},
	}
	for _, tc := range tests {
		d := mapFields(New(), tc.pgn, tc.id, tc.fields)
		var got []Value
		if d != nil {
			got = d.Updates[0].Values
		}
		if g, w := normal(t, got), normal(t, tc.want); !reflect.DeepEqual(g, w) {
			t.Errorf("%d %v:\n got %v\nwant %v", tc.pgn, tc.fields, g, w)
		}
	}
}

func ptr(s string) *string { return &s }

// A notification's time and a time to go are the update's time, read when written: the
// plugin stamps an update after mapping it.
func TestUpdateTimeLate(t *testing.T) {
	m := New()
	d := m.Map(&decode.Decoded{Header: decode.Header{PGN: 130850, Src: 9}, ID: "simnetAlarm",
		ByName: map[string]any{"alarm": "Wind data missing"}}, nil, "")
	if d == nil {
		t.Fatal("no delta")
	}
	d.Updates[0].Timestamp = "2026-02-03T04:05:06.789Z"
	got := string(d.AppendJSON(nil))
	if !strings.Contains(got, `"value":{"message":"Wind data missing","method":["visual"],"state":"warning","timestamp":"2026-02-03T04:05:06.789Z"}`) {
		t.Errorf("delta %s", got)
	}
	d = m.Map(&decode.Decoded{Header: decode.Header{PGN: 129284, Src: 9}, ByName: map[string]any{
		"etaDate": "2026.02.03", "etaTime": "05:05:06.789"}}, nil, "")
	d.Updates[0].Timestamp = "2026-02-03T04:05:06.789Z"
	if got := string(d.AppendJSON(nil)); !strings.Contains(got, `"path":"navigation.courseRhumbline.nextPoint.timeToGo","value":3600}`) {
		t.Errorf("delta %s", got)
	}
}

// AIS deltas name the target's context; the MMSI, name and call sign are root members.
func TestAISContext(t *testing.T) {
	m := New()
	d := mapFields(m, 129794, "", map[string]any{"userId": 244660001.0, "name": "NORTH STAR", "callsign": "PDAB",
		"imoNumber": 9123456.0, "typeOfShip": "Cargo ship", "etaDate": "2026.12.01", "etaTime": "25:61:00.5"})
	if d == nil {
		t.Fatal("no delta")
	}
	if d.Context != "vessels.urn:mrn:imo:mmsi:244660001" {
		t.Errorf("context %q", d.Context)
	}
	want := []Value{{"sensors.ais.class", "A"}, {"", map[string]any{"name": "NORTH STAR"}},
		{"navigation.destination.eta", "2026-12-01T00:00:00.500Z"},
		{"design.aisShipType", TypeName{ID: 70, Name: "Cargo ship"}},
		{"", map[string]any{"communication": map[string]any{"callsignVhf": "PDAB"}}},
		{"", map[string]any{"mmsi": "244660001"}},
		{"", map[string]any{"registrations": map[string]any{"imo": "IMO 9123456"}}}}
	if g, w := normal(t, d.Updates[0].Values), normal(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("values\n got %v\nwant %v", g, w)
	}
	var shape map[string]any
	if err := json.Unmarshal(d.AppendJSON(nil), &shape); err != nil || shape["context"] != d.Context {
		t.Errorf("JSON %v: %v", shape, err)
	}
	// Fewer than 9 digits: no delta, as the reference drops it.
	if d := mapFields(m, 129038, "", map[string]any{"userId": 1234567.0, "sog": 1.0}); d != nil {
		t.Errorf("short MMSI mapped: %+v", d)
	}
	// Base stations and SAR aircraft: the MMSI padded to 9 digits.
	d = mapFields(m, 129793, "", map[string]any{"userId": 2442000.0, "longitude": 4.3, "latitude": 52.7})
	if d == nil || d.Context != "shore.basestations.urn:mrn:imo:mmsi:002442000" {
		t.Errorf("base station: %+v", d)
	}
	// The mapper reuses its delta: the own vessel's next message has no target's context.
	if d := mapFields(m, 128267, "", map[string]any{"depth": 4.5}); d == nil || d.Context != "" {
		t.Errorf("own vessel after a target: %+v", d)
	}
}

func TestShipTypeNames(t *testing.T) {
	for n, want := range map[int64]string{20: "Wing In Ground", 21: "Wing In Ground hazard cat A", 29: "Wing In Ground (no other information)",
		36: "Sailing", 38: "", 41: "High speed craft carrying dangerous goods", 44: "High speed craft hazard cat D",
		49: "High speed craft (no additional information)", 57: "Spare #2", 61: "Passenger ship hazard cat A",
		71: "Cargo ship carrying dangerous goods", 85: "Tanker", 99: "Other (no additional information)", 100: "", 10: ""} {
		if got := aisShipTypeName(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
}

// Alerts: the text from 126985 is the message of the sender's 126983 notification; an
// alert without its text maps to nothing.
func TestAlerts(t *testing.T) {
	m := New()
	if d := mapFields(m, 126983, "", map[string]any{"alertType": "Alarm", "alertId": 3.0}); d != nil {
		t.Errorf("alert without text mapped: %+v", d)
	}
	if d := mapFields(m, 126985, "", map[string]any{"alertId": 3.0, "alertTextDescription": "Bilge high"}); d != nil {
		t.Errorf("alert text mapped: %+v", d)
	}
	d := mapFields(m, 126983, "", map[string]any{"alertType": 7.0, "alertCategory": "Technical", "alertSystem": 2.0, "alertId": 3.0,
		"acknowledgeStatus": "Yes"})
	if d == nil {
		t.Fatal("no delta")
	}
	v := d.Updates[0].Values[0]
	a, ok := v.Value.(Alert)
	if v.Path != "notifications.nmea.caution.technical.2.3" || !ok || a.State != "alert" || a.Message != "Bilge high" || len(a.Method) != 0 {
		t.Errorf("%s %+v", v.Path, v.Value)
	}
}

// The field-rule tables are whole: every entry gave a rule.
func TestFieldRules(t *testing.T) {
	for p, want := range map[uint32]int{127510: 8, 127511: 5} {
		if got := len(rules[p]); got != want {
			t.Errorf("%d: %d rules, want %d", p, got, want)
		}
	}
	if n := len(fieldRules(nil, "on .a b; bad entry; odd .x y")); n != 1 {
		t.Errorf("%d rules from one good entry", n)
	}
}
