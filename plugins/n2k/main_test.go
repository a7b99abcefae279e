package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"devhost/abi"
	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/node"
	"devhost/plugins/n2k/skmap"
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
	// Disabled, it asks to be dormant until enabled changes.
	if h.Dormant == nil || !h.Dormant.Equal(sleepOff) {
		t.Fatalf("dormant request while disabled: %+v", h.Dormant)
	}
	if err := h.SetConfig(map[string]any{"enabled": true}); err != nil {
		t.Fatal(err)
	}
	if h.Dormant != nil {
		t.Fatalf("dormant while enabled: %+v", h.Dormant)
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
	if h.Dormant == nil {
		t.Error("no dormant request after disabling")
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

// sent decodes the frames the plugin put on the bus since index from.
func sent(t *testing.T, h *sdk.FakeHost, from int) []*decode.Decoded {
	t.Helper()
	asm := decode.NewAssembler()
	var out []*decode.Decoded
	for _, f := range h.CANSent[from:] {
		if !f.Extended {
			t.Fatalf("frame %#x not extended", f.ID)
		}
		m, err := asm.Add(decode.Frame{ID: f.ID, Data: f.Data})
		if err != nil {
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		d, err := decode.Decode(*m)
		if err != nil {
			t.Fatalf("pgn %d: %v", m.PGN, err)
		}
		out = append(out, d)
	}
	return out
}

func fromBus(h *sdk.FakeHost, m decode.Message) {
	for _, f := range decode.Frames(m, 0, nil) {
		h.CANReceive(sdk.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
	}
}

func TestAddressClaimAndRequests(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true, "address": 100, "unique_number": 1234}); err != nil {
		t.Fatal(err)
	}
	msgs := sent(t, h, 0)
	if len(msgs) != 1 || msgs[0].PGN != 60928 || msgs[0].Src != 100 || msgs[0].Field("uniqueNumber") != 1234.0 {
		t.Fatalf("claim: %+v", msgs)
	}
	if st := getStatus(t, h); st["address"] != nil || st["name"] == nil {
		t.Errorf("claiming: address %v name %v", st["address"], st["name"])
	}
	// The claim stood 250 ms: the address is ours and the first heartbeat goes out.
	if err := h.Advance(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h); st["address"] != 100.0 {
		t.Fatalf("address %v", st["address"])
	}
	n := len(h.CANSent)
	if msgs := sent(t, h, 1); len(msgs) != 1 || msgs[0].PGN != 126993 {
		t.Fatalf("heartbeat: %+v", msgs)
	}
	// An ISO request for product information is answered (a fast-packet).
	fromBus(h, decode.Message{Header: decode.Header{Prio: 6, PGN: 59904, Src: 9, Dst: 100}, Data: []byte{0x14, 0xf0, 0x01}})
	msgs = sent(t, h, n)
	if len(msgs) != 1 || msgs[0].PGN != 126996 || msgs[0].Field("modelId") != "devhost n2k" {
		t.Fatalf("product information: %+v", msgs)
	}
	// A device with a lower NAME claims 100: the plugin claims 101.
	n = len(h.CANSent)
	fromBus(h, decode.Message{Header: decode.Header{Prio: 6, PGN: 60928, Src: 100, Dst: 255}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0}})
	msgs = sent(t, h, n)
	if len(msgs) != 1 || msgs[0].PGN != 60928 || msgs[0].Src != 101 {
		t.Fatalf("re-claim: %+v", msgs)
	}
	if err := h.Advance(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if st := getStatus(t, h); st["address"] != 101.0 || st["frames_out"].(float64) < 5 {
		t.Errorf("after the conflict: %v", st)
	}
	// A heartbeat every minute.
	n = len(h.CANSent)
	if err := h.Advance(time.Minute); err != nil {
		t.Fatal(err)
	}
	var beats int
	for _, m := range sent(t, h, n) {
		if m.PGN == 126993 {
			beats++
		}
	}
	if beats != 1 {
		t.Errorf("%d heartbeats in a minute", beats)
	}
}

func TestSwitchPut(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	// Disabled: no address, the PUT fails.
	if r, err := h.Put("electrical.switches.bank.2.3.state", true); err != nil || r.Result != 2 {
		t.Fatalf("put while disabled: %+v %v", r, err)
	}
	h.SetConfig(map[string]any{"enabled": true, "address": 50})
	h.Advance(300 * time.Millisecond)
	n := len(h.CANSent)
	r, err := h.Put("electrical.switches.bank.2.3.state", true)
	if err != nil || r.Result != 0 {
		t.Fatalf("put: %+v %v", r, err)
	}
	msgs := sent(t, h, n)
	if len(msgs) != 1 || msgs[0].PGN != 127502 || msgs[0].Src != 50 || msgs[0].Field("instance") != 2.0 ||
		msgs[0].Field("switch3") != "On" || msgs[0].Field("switch1") != "Take no action (no change)" {
		t.Fatalf("127502: %+v", msgs)
	}
	for path, v := range map[string]any{"electrical.switches.bank.2.3.state": "on", "electrical.switches.bank.2.29.state": true,
		"electrical.switches.bank.x.1.state": true, "electrical.switches.bank.2.3.order": 1.0} {
		if r, err := h.Put(path, v); err != nil || r.Result != 1 {
			t.Errorf("%s=%v: %+v %v", path, v, r, err)
		}
	}
	// The bank's status (127501) comes back as the state path.
	status, err := decode.Encode(127501, map[string]any{"instance": 2.0, "indicator3": 1.0})
	if err != nil {
		t.Fatal(err)
	}
	fromBus(h, decode.Message{Header: decode.Header{Prio: 3, PGN: 127501, Src: 60, Dst: 255}, Data: status})
	if v := h.Values()["electrical.switches.bank.2.3.state"]; v.Num != 1 {
		t.Errorf("state %+v", v)
	}
}

// A switch PUT made while the address is still being claimed waits for the claim (PENDING),
// then goes out from the claimed address and completes; one held when the gateway is
// disabled mid-claim fails with the reason, and the commands held are bounded.
func TestSwitchPutWaitsForTheClaim(t *testing.T) {
	const path = "electrical.switches.bank.2.3.state"
	replyTo := func(h *sdk.FakeHost, id uint32) (abi.PutReply, bool) {
		for i := len(h.PutReplies) - 1; i >= 0; i-- {
			if r := h.PutReplies[i]; r.ID == id && r.Result != abi.PutDeferred {
				return r, true
			}
		}
		return abi.PutReply{}, false
	}

	h := fakeHost(t)
	defer h.Stop()
	h.SetConfig(map[string]any{"enabled": true, "address": 50})
	n := len(h.CANSent)
	r, err := h.Put(path, true)
	if err != nil || r.Result != abi.PutDeferred {
		t.Fatalf("put during the claim: %+v %v", r, err)
	}
	for _, m := range sent(t, h, n) {
		if m.PGN == 127502 {
			t.Fatalf("127502 sent before the address is claimed")
		}
	}
	if _, done := replyTo(h, r.ID); done {
		t.Fatal("deferred PUT completed before the claim")
	}
	h.Advance(300 * time.Millisecond)
	var switched int
	for _, m := range sent(t, h, n) {
		if m.PGN == 127502 && m.Src == 50 && m.Field("switch3") == "On" {
			switched++
		}
	}
	if final, done := replyTo(h, r.ID); switched != 1 || !done || final.Result != abi.PutSuccess {
		t.Fatalf("after the claim: %d commands sent, reply %+v (completed %v)", switched, final, done)
	}

	// Disabled mid-claim: the held PUT fails with the reason; past the bound, at once.
	h2 := fakeHost(t)
	defer h2.Stop()
	h2.SetConfig(map[string]any{"enabled": true, "address": 50})
	var ids []uint32
	for range maxWaiting {
		r, err := h2.Put(path, false)
		if err != nil || r.Result != abi.PutDeferred {
			t.Fatalf("put during the claim: %+v %v", r, err)
		}
		ids = append(ids, r.ID)
	}
	if r, err := h2.Put(path, false); err != nil || r.Result != abi.PutFailure || !strings.Contains(r.Message, "too many") {
		t.Fatalf("put past the bound: %+v %v", r, err)
	}
	h2.SetConfig(map[string]any{"enabled": false})
	for _, id := range ids {
		if final, done := replyTo(h2, id); !done || final.Result != abi.PutFailure || final.Message != "no address on the bus" {
			t.Fatalf("held PUT %d after disabling: %+v (completed %v)", id, final, done)
		}
	}

	// The claim lost (every address held by a lower NAME): the held PUT fails, nothing sent.
	h3 := fakeHost(t)
	defer h3.Stop()
	h3.SetConfig(map[string]any{"enabled": true, "address": 50})
	n = len(h3.CANSent)
	r, err = h3.Put(path, true)
	if err != nil || r.Result != abi.PutDeferred {
		t.Fatalf("put during the claim: %+v %v", r, err)
	}
	for a := 0; a < 252; a++ {
		if a == 50 {
			continue
		}
		fromBus(h3, decode.Message{Header: decode.Header{Prio: 6, PGN: 60928, Src: uint8(a), Dst: 255}, Data: node.Name(1).Bytes()})
	}
	if _, done := replyTo(h3, r.ID); done {
		t.Fatal("held PUT completed while the claim still stands a chance")
	}
	fromBus(h3, decode.Message{Header: decode.Header{Prio: 6, PGN: 60928, Src: 50, Dst: 255}, Data: node.Name(1).Bytes()})
	if final, done := replyTo(h3, r.ID); !done || final.Result != abi.PutFailure || final.Message != "no address on the bus" {
		t.Fatalf("held PUT after the claim was lost: %+v (completed %v)", final, done)
	}
	for _, m := range sent(t, h3, n) {
		if m.PGN == 127502 {
			t.Fatal("127502 sent without an address")
		}
	}
}

// A composite value (129025's position) goes to Signal K as the JSON encoding/json writes.
// A composite value goes to Signal K as its JSON text, written for it alone (delta events
// off) or taken from the delta event's text (on).
func TestCompositeValuePublishedAsJSON(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		h := fakeHost(t)
		if err := h.SetConfig(map[string]any{"enabled": true, "deltas": deltas}); err != nil {
			t.Fatal(err)
		}
		// Latitude 42.5°, longitude -71.25°, in units of 1e-7 degrees.
		lat, lon := int32(425000000), int32(-712500000)
		data := binary.LittleEndian.AppendUint32(nil, uint32(lat))
		data = binary.LittleEndian.AppendUint32(data, uint32(lon))
		msg := decode.Message{Header: decode.Header{Prio: 2, PGN: 129025, Src: 9, Dst: 255}, Data: data}
		for _, f := range decode.Frames(msg, 0, nil) {
			h.CANReceive(sdk.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
		}
		want, err := json.Marshal(skmap.Position{Longitude: -71.25, Latitude: 42.5})
		if err != nil {
			t.Fatal(err)
		}
		var got []abi.Value
		for _, v := range h.Published {
			if v.Path == "navigation.position" {
				got = append(got, v.Value)
			}
		}
		if len(got) != 1 || got[0].Kind != abi.KindJSON || got[0].Str != string(want) {
			t.Errorf("deltas %v: navigation.position %+v, want JSON %s", deltas, got, want)
		}
		h.Stop()
	}
}

// An AIS target's values are another vessel's: they go to Signal K under the target's
// context (the MMSI at its root), in the delta events with their context, and never onto
// the own vessel's paths, whatever the own vessel's path overrides say.
func TestAISTargetPublishedUnderItsContext(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	overrides := `[{"from":"navigation","to":"own.navigation"}]`
	if err := h.SetConfig(map[string]any{"enabled": true, "deltas": true, "path_overrides": overrides, "rate_ms": 1000}); err != nil {
		t.Fatal(err)
	}
	data, err := decode.Encode(129038, map[string]any{"messageId": 1.0, "userId": 244660001.0,
		"longitude": 4.5, "latitude": 52.1, "sog": 5.2, "cog": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	msg := decode.Message{Header: decode.Header{Prio: 4, PGN: 129038, Src: 40, Dst: 255}, Data: data}
	for range 2 { // the rate limit is the own vessel's: both reports go out
		for _, f := range decode.Frames(msg, 0, nil) {
			h.CANReceive(sdk.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
		}
	}
	getStatus(t, h) // sends the deltas gathered
	for _, v := range h.Published {
		if strings.Contains(v.Path, "navigation.") {
			t.Errorf("AIS target published on the own vessel: %+v", v)
		}
	}
	const ctx = "vessels.urn:mrn:imo:mmsi:244660001"
	got := map[string][]string{}
	for _, v := range h.Contexts[ctx] {
		got[v.Path] = append(got[v.Path], v.Value.String())
	}
	want := map[string][]string{
		"navigation.position":        {`{"longitude":4.5,"latitude":52.1}`, `{"longitude":4.5,"latitude":52.1}`},
		"navigation.speedOverGround": {"5.2", "5.2"},
		"":                           {`{"mmsi":"244660001"}`, `{"mmsi":"244660001"}`},
	}
	for path, vs := range want {
		if !slices.Equal(got[path], vs) {
			t.Errorf("%s: %v, want %v (all: %v)", path, got[path], vs, got)
		}
	}
	if len(h.Contexts) != 1 {
		t.Errorf("contexts %v", h.Contexts)
	}
	found := false
	for _, e := range h.SSE {
		if e.Event != "n2k_delta" {
			continue
		}
		var ds []struct {
			Context string `json:"context"`
		}
		if err := json.Unmarshal(e.Data, &ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			found = found || d.Context == "vessels.urn:mrn:imo:mmsi:244660001"
		}
	}
	if !found {
		t.Errorf("no delta event with the target's context in %+v", h.SSE)
	}
}

// The status is written by hand as json.Marshal writes it: every member, null ones, map keys
// in order, a gateway's members and strings that need escaping.
func TestStatusJSON(t *testing.T) {
	addr, name, prod, last := 100, "c0ffee", `model "x" <1>`, "dial: refused"
	for i, st := range []status{
		{State: "disabled", Source: "can", Devices: []deviceView{}},
		{State: "receiving", Source: "can", Address: &addr, Name: &name, FramesIn: 12, FramesOut: 3, Messages: 9, Deltas: 7,
			Errors: map[string]uint64{"unknown_pgn": 2, "bad_frame": 1}, PGNs: map[string]uint64{"129025": 4, "127250": 5, "60928": 1},
			Devices: []deviceView{{Address: 7, Name: &name, Product: &prod, LastSeen: 1.25}, {Address: 9, LastSeen: 0}}},
		{State: "reconnecting", Source: "ydraw_tcp", Errors: map[string]uint64{}, PGNs: map[string]uint64{}, Devices: []deviceView{},
			Gateway: &gatewayView{Host: "gw.local", Port: 1457, Connects: 2}, LastError: &last},
		{State: "receiving", Source: "can", Devices: []deviceView{},
			RateLimit: &rateView{IntervalMs: 500, Streams: 4096, Held: 12, Unlimited: 3}},
	} {
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.appendJSON(nil); string(got) != string(want) {
			t.Errorf("status %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// Each delta of a message from the CAN bus names, in its event, the frame that completed it
// (counted from the start): a tool that fed a log's frames stamps it with that line's time.
func TestDeltaEventsNameTheirFrame(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true, "deltas": true}); err != nil {
		t.Fatal(err)
	}
	ais, err := decode.Encode(129038, map[string]any{"messageId": 1.0, "userId": 244660001.0,
		"longitude": 4.5, "latitude": 52.1, "sog": 5.2, "cog": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	aisFrames := decode.Frames(decode.Message{Header: decode.Header{Prio: 4, PGN: 129038, Src: 40, Dst: 255}, Data: ais}, 0, nil)
	h.CANReceive(sdk.CANFrame{ID: 0x123, Data: []byte{1}}) // frame 1: not NMEA 2000, still counted
	for _, f := range testFrames() {                       // frame 2
		h.CANReceive(f)
	}
	fromBus(h, decode.Message{Header: decode.Header{Prio: 4, PGN: 129038, Src: 40, Dst: 255}, Data: ais})
	getStatus(t, h)
	var got []uint64
	for _, e := range h.SSE {
		if e.Event != "n2k_delta" {
			continue
		}
		var ds []struct {
			Frame   *uint64           `json:"frame"`
			Updates []json.RawMessage `json:"updates"`
		}
		if err := json.Unmarshal(e.Data, &ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Frame == nil || len(d.Updates) != 1 {
				t.Fatalf("delta without its frame: %s", e.Data)
			}
			got = append(got, *d.Frame)
		}
	}
	if want := []uint64{2, uint64(2 + len(aisFrames))}; !slices.Equal(got, want) {
		t.Errorf("frames %v, want %v", got, want)
	}
}
