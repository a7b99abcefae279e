//go:build !wasip1

package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"devhost/abi"
	"devhost/sdk"
)

func loadManifest(t *testing.T) abi.Manifest {
	t.Helper()
	m, err := sdk.ReadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// boot starts the switch bank on a fake host with pins 1..8 and the given switch table.
func boot(t *testing.T, table string, faulty ...int) *sdk.FakeHost {
	t.Helper()
	h := &sdk.FakeHost{Manifest: loadManifest(t), Pins: map[int]*sdk.FakePin{}}
	for p := 1; p <= 8; p++ {
		h.Pins[p] = &sdk.FakePin{}
	}
	for _, p := range faulty {
		h.Pins[p].Fault = true
	}
	if table != "" {
		if err := h.SetConfig(map[string]any{"switches": table}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Start(newBank().plugin()); err != nil {
		t.Fatalf("start: %v", err)
	}
	return h
}

func state(t *testing.T, h *sdk.FakeHost, name string) (bool, bool) {
	t.Helper()
	v, ok := h.Values()[statePath(name)]
	return v.Bool, ok && v.Kind == abi.KindBool
}

func TestManifest(t *testing.T) {
	m := loadManifest(t)
	if m.ID != "app" || len(m.Routes) != 1 || m.Routes[0] != (abi.Route{Method: "GET", Path: "/app/switches"}) {
		t.Fatalf("manifest %+v", m)
	}
	if err := abi.CheckVersion(m.ABI, m.ABIMinor); err != nil {
		t.Fatal(err)
	}
}

func TestBootPublishesEverySwitchAtItsDefault(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1,"default":"on"},{"name":"deck","pin":2,"default":false},{"name":"fan","pin":3}]`)
	if h.Descriptor == nil {
		t.Fatal("namespace not registered")
	}
	for name, want := range map[string]bool{"pump": true, "deck": false, "fan": false} {
		if got, ok := state(t, h, name); !ok || got != want {
			t.Errorf("%s published %v (%v), want %v", name, got, ok, want)
		}
		if _, ok := h.Meta[statePath(name)]; !ok {
			t.Errorf("%s: no meta declared", name)
		}
	}
	if !h.Pins[1].Level || h.Pins[2].Level || !h.Pins[2].Output || !h.Pins[3].Output {
		t.Fatal("pins not driven to the defaults")
	}
	if !reflect.DeepEqual(h.PutPatterns, []string{"electrical.switches.*"}) {
		t.Fatalf("put patterns %v", h.PutPatterns)
	}
	if len(h.Health) != 0 {
		t.Fatalf("a healthy bank reported %v", h.Health)
	}
}

func TestEmptyBank(t *testing.T) {
	h := boot(t, "")
	if len(h.Published) != 0 || len(h.Health) != 0 {
		t.Fatalf("published %v health %v", h.Published, h.Health)
	}
	r, _ := h.HTTP("GET", "/app/switches", "")
	if r.Status != 200 || string(r.Body) != `{"switches":[]}` {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

func TestPuts(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1},{"name":"bad-pin","pin":7}]`, 7)
	cases := []struct {
		path   string
		value  any
		result abi.PutResult
		on     bool // pump's state after the PUT
	}{
		{statePath("pump"), true, abi.PutSuccess, true},
		{statePath("pump"), false, abi.PutSuccess, false},
		{statePath("pump"), 1, abi.PutSuccess, true},
		{statePath("pump"), 0, abi.PutSuccess, false},
		{statePath("pump"), 2, abi.PutInvalid, false},
		{statePath("pump"), "on", abi.PutInvalid, false},
		{statePath("pump"), nil, abi.PutInvalid, false},
		{statePath("pump"), json.RawMessage(`{"on":true}`), abi.PutInvalid, false},
		{statePath("nosuch"), true, abi.PutInvalid, false},
		{"electrical.switches.pump.level", true, abi.PutInvalid, false},
		{statePath("bad-pin"), true, abi.PutFailure, false},
	}
	for _, c := range cases {
		r, err := h.Put(c.path, c.value)
		if err != nil || r.Result != c.result {
			t.Errorf("PUT %s %v: %v %q (%v), want %v", c.path, c.value, r.Result, r.Message, err, c.result)
		}
		if on, _ := state(t, h, "pump"); on != c.on || h.Pins[1].Level != c.on {
			t.Errorf("after PUT %s %v: published %v, pin %v, want %v", c.path, c.value, on, h.Pins[1].Level, c.on)
		}
	}
}

func TestPinFaultRaisesAndClearsHealth(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1},{"name":"deck","pin":2}]`)
	h.Pins[2].Fault = true
	r, _ := h.Put(statePath("deck"), true)
	if r.Result != abi.PutFailure || r.Message != "pin 2 fault" {
		t.Fatalf("reply %+v", r)
	}
	c := h.Health["app.pinFault"]
	if c.State != sdk.Alarm || !strings.Contains(c.Message, "deck (pin 2)") || c.Reboot {
		t.Fatalf("condition %+v", c)
	}
	if on, _ := state(t, h, "deck"); on {
		t.Fatal("a failed switch published the new state")
	}
	resp, _ := h.HTTP("GET", "/app/switches", "")
	if !strings.Contains(string(resp.Body), `"fault":"sdk: gpio write: hardware fault"`) {
		t.Fatalf("fault not shown: %s", resp.Body)
	}
	h.Pins[2].Fault = false
	if r, _ := h.Put(statePath("deck"), true); r.Result != abi.PutSuccess {
		t.Fatalf("retry %+v", r)
	}
	if c := h.Health["app.pinFault"]; c.State != sdk.Normal {
		t.Fatalf("condition not cleared: %+v", c)
	}
}

func TestFaultAtBoot(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1,"default":true}]`, 1)
	if h.Health["app.pinFault"].State != sdk.Alarm {
		t.Fatalf("health %v", h.Health)
	}
	if on, ok := state(t, h, "pump"); !ok || on {
		t.Fatalf("faulted switch published %v %v, want off", on, ok)
	}
	// A configuration change retries the faulted pin.
	h.Pins[1].Fault = false
	if err := h.SetConfig(map[string]any{"switches": `[{"name":"pump","pin":1,"default":true}]`}); err != nil {
		t.Fatal(err)
	}
	if !h.Pins[1].Level || h.Health["app.pinFault"].State != sdk.Normal {
		t.Fatalf("pin %v health %v", h.Pins[1].Level, h.Health)
	}
}

func TestConfigChanges(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1},{"name":"deck","pin":2}]`)
	if r, _ := h.Put(statePath("pump"), true); r.Result != abi.PutSuccess {
		t.Fatal(r)
	}
	h.Published = nil
	// pump moves to pin 3 and keeps its state; deck goes; fan arrives at its default.
	err := h.SetConfig(map[string]any{"switches": `[{"name":"pump","pin":3},{"name":"fan","pin":4,"default":"on"}]`})
	if err != nil {
		t.Fatal(err)
	}
	if on, _ := state(t, h, "pump"); !on || !h.Pins[3].Level {
		t.Fatalf("moved pump: published %v, pin 3 %v", on, h.Pins[3].Level)
	}
	if on, _ := state(t, h, "fan"); !on || !h.Pins[4].Level {
		t.Fatal("new fan not at its default")
	}
	if _, ok := h.Values()[statePath("deck")]; ok {
		t.Fatal("removed switch published")
	}
	if r, _ := h.Put(statePath("deck"), true); r.Result != abi.PutInvalid {
		t.Fatalf("PUT to a removed switch: %+v", r)
	}
}

func TestBadRowsAreSkippedAndReported(t *testing.T) {
	h := boot(t, `[{"name":"ok","pin":1},{"name":"bad name","pin":2},{"name":"x","pin":-1},{"name":"y","pin":1.5},`+
		`{"name":"z","pin":3,"default":"maybe"},{"name":"ok","pin":4},{"name":"w","pin":1},{"pin":5}]`)
	c := h.Health["app.config"]
	if c.State != sdk.Warn {
		t.Fatalf("config condition %+v", c)
	}
	for _, want := range []string{"row 2: bad name", "row 3: bad pin", "row 4: bad pin", "row 5: bad default", "row 6: name ok repeated"} {
		if !strings.Contains(c.Message, want) && !strings.Contains(strings.Join(h.Logs, "\n"), want) {
			t.Errorf("problem %q not reported: %q", want, c.Message)
		}
	}
	if len(c.Message) > abi.MaxHealthMessage {
		t.Fatalf("message of %d bytes", len(c.Message))
	}
	if got := h.Paths(); !reflect.DeepEqual(got, []string{statePath("ok")}) {
		t.Fatalf("published %v", got)
	}
	if err := h.SetConfig(map[string]any{"switches": `[{"name":"ok","pin":1}]`}); err != nil {
		t.Fatal(err)
	}
	if h.Health["app.config"].State != sdk.Normal {
		t.Fatal("config condition not cleared")
	}
}

func TestHTTPList(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1,"default":true},{"name":"deck","pin":2}]`)
	r, err := h.HTTP("GET", "/app/switches", "")
	if err != nil || r.Status != 200 || r.ContentType != "application/json" {
		t.Fatalf("%+v %v", r, err)
	}
	want := `{"switches":[{"name":"pump","pin":1,"state":true},{"name":"deck","pin":2,"state":false}]}`
	if string(r.Body) != want {
		t.Fatalf("body %s", r.Body)
	}
}

func TestParseState(t *testing.T) {
	for _, c := range []struct {
		in     any
		on, ok bool
	}{
		{true, true, true}, {false, false, true}, {1.0, true, true}, {0.0, false, true}, {2.0, false, false},
		{"ON", true, true}, {"off", false, true}, {"true", true, true}, {"0", false, true}, {"maybe", false, false},
		{nil, false, true}, {[]any{}, false, false},
	} {
		on, ok := parseState(c.in)
		if on != c.on || ok != c.ok {
			t.Errorf("parseState(%v) = %v %v", c.in, on, ok)
		}
	}
}

func TestHealthIsReportedOnlyOnChange(t *testing.T) {
	h := boot(t, `[{"name":"pump","pin":1},{"name":"deck","pin":2}]`, 2)
	for i := 0; i < 3; i++ {
		if r, _ := h.Put(statePath("deck"), true); r.Result != abi.PutFailure {
			t.Fatal(r)
		}
	}
	n := 0
	for _, c := range h.Calls {
		if c == abi.FnHealthReport {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d health reports for one unchanged fault", n)
	}
}
