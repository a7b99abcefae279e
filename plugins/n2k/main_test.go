package main

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"devhost/abi"
	"devhost/plugins/n2k/decode"
	"devhost/sdk"
)

func fakeHost(t *testing.T) *sdk.FakeHost {
	t.Helper()
	b, err := os.ReadFile("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := abi.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	h := &sdk.FakeHost{Manifest: m}
	if err := h.Start(nil); err != nil {
		t.Fatal(err)
	}
	return h
}

// frames of a 127250 heading (single frame) and a 129029 GNSS position (fast-packet).
func testFrames() []sdk.CANFrame {
	heading := decode.Message{Header: decode.Header{Prio: 2, PGN: 127250, Src: 7, Dst: 255},
		Data: []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}}
	var out []sdk.CANFrame
	for _, f := range decode.Frames(heading, 0, nil) {
		out = append(out, sdk.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
	}
	return out
}

func getStatus(t *testing.T, h *sdk.FakeHost) map[string]any {
	t.Helper()
	r, err := h.HTTP("GET", "/n2k/status", "")
	if err != nil || r.Status != 200 {
		t.Fatalf("status: %v %+v", err, r)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(r.Body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestIdleUntilEnabled(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if len(h.CANFilters) != 0 {
		t.Fatalf("filters while disabled: %v", h.CANFilters)
	}
	if st := getStatus(t, h); st["state"] != "disabled" || st["address"] != nil {
		t.Errorf("status %v", st)
	}
	if err := h.SetConfig(map[string]any{"enabled": true}); err != nil {
		t.Fatal(err)
	}
	if len(h.CANFilters) != 1 {
		t.Fatalf("filters %v", h.CANFilters)
	}
	for _, f := range testFrames() {
		if err := h.CANReceive(f); err != nil {
			t.Fatal(err)
		}
	}
	v := h.Values()
	if got := v["navigation.headingTrue"]; got.Num != 1.512 {
		t.Errorf("headingTrue %+v", got)
	}
	if got := v["navigation.magneticVariation"]; got.Num != -0.261 {
		t.Errorf("magneticVariation %+v", got)
	}
	st := getStatus(t, h)
	if st["state"] != "receiving" || st["frames_in"] != 1.0 || st["pgns"].(map[string]any)["127250"] != 1.0 {
		t.Errorf("status %v", st)
	}
	// Disabled again: the filters go, frames are ignored.
	if err := h.SetConfig(map[string]any{"enabled": false}); err != nil {
		t.Fatal(err)
	}
	if len(h.CANFilters) != 0 {
		t.Errorf("filters after disabling: %v", h.CANFilters)
	}
}

func TestDeltaEventsAndDeny(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true, "deltas": true}); err != nil {
		t.Fatal(err)
	}
	for _, f := range testFrames() {
		h.CANReceive(f)
	}
	countDeltas := func() int {
		n := 0
		for _, e := range h.SSE {
			if e.Event != "n2k_delta" {
				continue
			}
			var ds []struct {
				Updates []struct {
					Source map[string]any `json:"source"`
				} `json:"updates"`
			}
			if err := json.Unmarshal(e.Data, &ds); err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				n++
				if s := d.Updates[0].Source; s["src"] != "7" || s["pgn"] != 127250.0 || s["type"] != "NMEA2000" {
					t.Errorf("source %v", s)
				}
			}
		}
		return n
	}
	// The deltas wait for a status answer (or the next second) and go in one event.
	for _, f := range testFrames() {
		h.CANReceive(f)
	}
	if n := countDeltas(); n != 0 {
		t.Fatalf("%d deltas sent before a status answer", n)
	}
	getStatus(t, h)
	if n := countDeltas(); n != 2 {
		t.Fatalf("%d deltas", n)
	}
	events := 0
	for _, e := range h.SSE {
		if e.Event == "n2k_delta" {
			events++
		}
	}
	if events != 1 {
		t.Errorf("%d n2k_delta events, want the 2 deltas in 1", events)
	}
	// Many deltas: events stay under the ABI's 8 KiB.
	for i := 0; i < 100; i++ {
		for _, f := range testFrames() {
			h.CANReceive(f)
		}
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if n := countDeltas(); n != 102 {
		t.Errorf("%d deltas after 100 more", n)
	}
	for _, e := range h.SSE {
		if len(e.Data) > 8000 {
			t.Errorf("event of %d bytes", len(e.Data))
		}
	}
	if err := h.SetConfig(map[string]any{"enabled": true, "pgn_deny": "127250"}); err != nil {
		t.Fatal(err)
	}
	n := len(h.Published)
	for _, f := range testFrames() {
		h.CANReceive(f)
	}
	if len(h.Published) != n {
		t.Errorf("denied PGN published")
	}
}

func TestBadFramesAndSilence(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	h.SetConfig(map[string]any{"enabled": true})
	h.CANReceive(sdk.CANFrame{ID: 0x123, Data: []byte{1}}) // 11-bit: not NMEA 2000
	st := getStatus(t, h)
	if st["errors"].(map[string]any)["bad_frame"] != 1.0 {
		t.Errorf("errors %v", st["errors"])
	}
	if err := h.Advance(11 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c := h.Health["n2k.bus"]; c.State != sdk.Warn {
		t.Errorf("n2k.bus %+v", c)
	}
	for _, f := range testFrames() {
		h.CANReceive(f)
	}
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if c := h.Health["n2k.bus"]; c.State != sdk.Normal {
		t.Errorf("n2k.bus after frames %+v", c)
	}
	var snap bool
	for _, e := range h.SSE {
		snap = snap || e.Event == "n2k" && e.Retain
	}
	if !snap {
		t.Error("no retained n2k event")
	}
}
