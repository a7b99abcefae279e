package plugin

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	sktypes "devhost/host/sk"
)

// hdgPGN is the PGN of a compass's Vessel Heading.
const hdgPGN = 127250

// sk_publish_src (ABI 1.5) hands values to the Signal K client with their source and
// context, refuses a bad source, context or record whole, and caps the live sources of an
// instance as sk_publish_ctx caps its contexts.
func TestSKPublishSrc(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	fsk := newFakeSK()
	s, invoke := publishSession(t, clk, fsk)
	call := func(msg []byte) int32 { return invoke(fnSKPublishSrc, msg) }
	gps := func(addr int, pgn uint32) abi.Source {
		return abi.Source{Type: abi.SourceTypeN2K, Src: fmt.Sprint(addr), PGN: pgn}
	}
	msg := func(src abi.Source, ctx string, vs ...abi.PathValue) []byte {
		return abi.AppendValues(abi.AppendSourceGroup(nil, src, ctx, len(vs)), vs)
	}
	hdg := abi.PathValue{Path: "navigation.headingMagnetic", Value: abi.Number(1.25)}
	const target = "vessels.urn:mrn:imo:mmsi:230123456"

	if rc := call(msg(gps(35, hdgPGN), "", hdg)); rc != 0 {
		t.Fatalf("own vessel: %d", rc)
	}
	if rc := call(msg(gps(43, 129038), target, abi.PathValue{Path: "navigation.speedOverGround", Value: abi.Number(4)})); rc != 0 {
		t.Fatalf("target: %d", rc)
	}
	want := []sourced{
		{sktypes.Source{Type: "NMEA2000", Src: "35", PGN: hdgPGN}, "", []sktypes.Value{{Path: "navigation.headingMagnetic", Value: 1.25}}},
		{sktypes.Source{Type: "NMEA2000", Src: "43", PGN: 129038}, target, []sktypes.Value{{Path: "navigation.speedOverGround", Value: 4.0}}},
	}
	if fmt.Sprint(fsk.srcValues) != fmt.Sprint(want) || len(fsk.values) != 0 || len(fsk.ctxValues) != 0 {
		t.Fatalf("published %+v (device-sourced %+v %+v)", fsk.srcValues, fsk.values, fsk.ctxValues)
	}
	for name, b := range map[string][]byte{
		"device src":     msg(abi.Source{Type: "Plugin", Src: abi.DeviceSrc}, "", hdg),
		"address 254":    msg(gps(254, hdgPGN), "", hdg),
		"no pgn":         msg(gps(35, 0), "", hdg),
		"vessels.self":   msg(gps(35, hdgPGN), "vessels.self", hdg),
		"no values":      abi.AppendSourceGroup(nil, gps(35, hdgPGN), "", 0),
		"bad 2nd group":  append(msg(gps(35, hdgPGN), "", hdg), msg(gps(35, 0), "", hdg)...),
		"root of self":   msg(gps(35, hdgPGN), "", abi.PathValue{Value: abi.JSON([]byte(`{"name":"x"}`))}),
		"truncated head": abi.AppendSourceGroup(nil, gps(35, hdgPGN), "", 1)[:9],
	} {
		if rc := call(b); rc != int32(abi.ErrInvalid) {
			t.Errorf("%s: %d, want %d", name, rc, abi.ErrInvalid)
		}
	}
	if len(fsk.srcValues) != 2 {
		t.Fatalf("refused calls published: %+v", fsk.srcValues[2:])
	}

	// One call carries the groups of several sources: each is published with its own.
	cog := abi.PathValue{Path: "navigation.courseOverGroundTrue", Value: abi.Number(0.5)}
	if rc := call(append(msg(gps(35, hdgPGN), "", hdg), msg(gps(36, 129026), "", cog)...)); rc != 0 {
		t.Fatalf("two groups: %d", rc)
	}
	want = append(want,
		sourced{sktypes.Source{Type: "NMEA2000", Src: "35", PGN: hdgPGN}, "", []sktypes.Value{{Path: "navigation.headingMagnetic", Value: 1.25}}},
		sourced{sktypes.Source{Type: "NMEA2000", Src: "36", PGN: 129026}, "", []sktypes.Value{{Path: "navigation.courseOverGroundTrue", Value: 0.5}}})
	if fmt.Sprint(fsk.srcValues) != fmt.Sprint(want) {
		t.Fatalf("two groups published %+v", fsk.srcValues[2:])
	}
	fsk.srcValues = fsk.srcValues[:2]

	// Another PGN of a live sender is the same source; new senders fill the cap.
	if rc := call(msg(gps(35, 129025), "", hdg)); rc != 0 {
		t.Fatalf("a live source's other PGN: %d", rc)
	}
	for i := 3; i < abi.MaxContexts; i++ { // 35, 36 and 43 are live
		if rc := call(msg(abi.Source{Type: "Plugin", Src: fmt.Sprint("s", i)}, "", hdg)); rc != 0 {
			t.Fatalf("source %d: %d", i, rc)
		}
	}
	if rc := call(msg(abi.Source{Type: "Plugin", Src: "one-more"}, "", hdg)); rc != int32(abi.ErrLimit) {
		t.Fatalf("a source past the cap: %d", rc)
	}
	clk.Advance(abi.ContextIdleMs * time.Millisecond)
	if rc := call(msg(abi.Source{Type: "Plugin", Src: "one-more"}, "", hdg)); rc != 0 {
		t.Fatalf("after the others went idle: %d", rc)
	}
	if len(s.srcs.last) != 1 {
		t.Fatalf("%d live sources, want 1", len(s.srcs.last))
	}
}

// A group refused by a cap ends the call with -4 after the groups before it were published,
// and leaves nothing of itself recorded: its source stays unknown when its context was refused.
func TestSKPublishSrcCapMidCall(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	fsk := newFakeSK()
	s, invoke := publishSession(t, clk, fsk)
	group := func(src, ctx string) []byte {
		v := abi.PathValue{Path: "navigation.speedOverGround", Value: abi.Number(1)}
		return abi.AppendValues(abi.AppendSourceGroup(nil, abi.Source{Type: "Plugin", Src: src}, ctx, 1), []abi.PathValue{v})
	}
	for i := range abi.MaxContexts {
		if rc := invoke(fnSKPublishSrc, group("a", fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", i))); rc != 0 {
			t.Fatalf("context %d: %d", i, rc)
		}
	}
	n := len(fsk.srcValues)
	msg := append(group("b", ""), group("c", "vessels.urn:mrn:imo:mmsi:999999999")...)
	if rc := invoke(fnSKPublishSrc, msg); rc != int32(abi.ErrLimit) {
		t.Fatalf("a new context past the cap: %d", rc)
	}
	if len(fsk.srcValues) != n+1 || fsk.srcValues[n].src.Src != "b" {
		t.Fatalf("published %+v, want the first group alone", fsk.srcValues[n:])
	}
	if _, ok := s.srcs.last[sourceKey{"Plugin", "c", ""}]; ok {
		t.Fatal("the refused group's source was recorded live")
	}
}
