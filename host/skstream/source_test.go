package skstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/sk"
)

// gpsPGN is the PGN of a GNSS receiver's rapid position update.
const gpsPGN = 129025

// One batch window sends one update per (context, source): the device's own values first,
// then the others in the order they joined; the same path from two sources keeps both, and
// within one source the last value of a path wins. The label stays the device's.
func TestPublishSourceOneMessagePerSource(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	gps1 := sk.Source{Type: "NMEA2000", Src: "35", PGN: gpsPGN}
	gps2 := sk.Source{Type: "NMEA2000", Src: "36", PGN: gpsPGN, Instance: "1"}
	pos := func(lat float64) sk.Value {
		v, _ := json.Marshal(map[string]float64{"latitude": lat, "longitude": 24.9})
		return sk.Value{Path: "navigation.position", Value: json.RawMessage(v)}
	}
	must(t, f.s.PublishSource(gps1, "", pos(60.1)))
	must(t, f.s.PublishNumber("environment.inside.temperature", 293))
	must(t, f.s.PublishSource(gps2, "", pos(60.2)))
	must(t, f.s.PublishSource(gps1, "", pos(60.3)))
	must(t, f.s.PublishSource(gps1, ctxA, sk.Value{Path: "navigation.speedOverGround", Value: 2.5}))
	f.advance(1, 100*time.Millisecond)
	for _, want := range []struct {
		ctx    string
		source string
		values []string
	}{
		{"vessels.self", `{"label":"dev.probe-1","src":"devhost"}`, []string{"environment.inside.temperature=293"}},
		{"vessels.self", `{"label":"dev.probe-1","type":"NMEA2000","src":"35","pgn":129025}`, []string{`navigation.position={"latitude":60.3,"longitude":24.9}`}},
		{"vessels.self", `{"label":"dev.probe-1","type":"NMEA2000","src":"36","pgn":129025,"instance":"1"}`, []string{`navigation.position={"latitude":60.2,"longitude":24.9}`}},
		{ctxA, `{"label":"dev.probe-1","type":"NMEA2000","src":"35","pgn":129025}`, []string{"navigation.speedOverGround=2.5"}},
	} {
		b := c.Next(t)
		var d wireDelta
		var raw struct {
			Updates []struct{ Source json.RawMessage }
		}
		if err := json.Unmarshal(b, &d); err != nil || json.Unmarshal(b, &raw) != nil || len(raw.Updates) != 1 {
			t.Fatalf("not a delta with one update: %s (%v)", b, err)
		}
		if d.Context != want.ctx || string(raw.Updates[0].Source) != want.source || !slices.Equal(d.values(), want.values) {
			t.Fatalf("delta %s %s %v, want %s %s %v", d.Context, raw.Updates[0].Source, d.values(), want.ctx, want.source, want.values)
		}
	}
	c.ExpectNone(t)
}

// Sources count against the batch's cap of other groups: the 65th closes the batch early,
// and every value still arrives.
func TestPublishSourceBatchCap(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	for i := range MaxBatchContexts + 1 {
		src := sk.Source{Type: "NMEA2000", Src: fmt.Sprint(i), PGN: 127250}
		must(t, f.s.PublishSource(src, "", sk.Value{Path: "navigation.headingMagnetic", Value: float64(i)}))
	}
	for i := range MaxBatchContexts + 1 {
		if i == MaxBatchContexts {
			c.ExpectNone(t)
			f.advance(1, 100*time.Millisecond)
		}
		if d := nextDelta(t, c); !slices.Equal(d.values(), []string{fmt.Sprint("navigation.headingMagnetic=", i)}) {
			t.Fatalf("message %d: %v", i, d.values())
		}
	}
}

// A source the stream cannot copy into a message as is, or the device's own src, is refused
// and nothing is queued.
func TestPublishSourceRefuses(t *testing.T) {
	f := newFixture(t)
	v := sk.Value{Path: "p.n", Value: 1.0}
	for _, src := range []sk.Source{
		{Type: "NMEA2000", Src: "a.b", PGN: 1},
		{Type: "NMEA2000", Src: "", PGN: 1},
		{Type: "", Src: "1"},
		{Type: "Plugin", Src: "x", Instance: `"`},
		{Type: "Plugin", Src: SourceSrc},
	} {
		if err := f.s.PublishSource(src, "", v); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v", src, err)
		}
	}
	if err := f.s.PublishSource(sk.Source{Type: "Plugin", Src: "x"}, "", sk.Value{Path: "", Value: json.RawMessage(`{}`)}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("the root of vessels.self: %v", err)
	}
	if st := f.s.Status(); st.Buffered != 0 {
		t.Fatalf("status %+v", st)
	}
}

// A PUT-able path's state that came with a source of its own (sk.Sourced, a relayed switch
// bank's status) is published again under that source, at registration and on connect, never
// under the device's own: the server would otherwise hold the path from two sources and ask a
// PUT which one.
func TestPutableStateKeepsItsSource(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	bank := sk.Source{Type: "NMEA2000", Src: "48", PGN: 127501}
	var reads atomic.Int32
	_, err := f.s.HandlePut(PutPath{
		Path:   "electrical.switches.bank.2.3.state",
		Handle: func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutSuccess, "") },
		Current: func() any {
			reads.Add(1)
			return sk.Sourced{Source: bank, Value: 1.0}
		},
	})
	must(t, err)
	c := f.connect()
	// The state is published at registration, while offline, and again once connected, each
	// time read before the publish and once after it (to see whether it moved). The two
	// publishes meet in one message or go as two, as the buffered message's write and the
	// connect's publish fall, the second paced as part of the backlog or not; once the
	// fourth read has begun the second publish is queued, and once the stream has flushed
	// its sent count says how many frames went. Each must carry the bank's source.
	eventually(t, "the state published again on connect", func() bool { return reads.Load() >= 4 })
	f.flush(time.Second / time.Duration(DefaultSettings().DrainPerS))
	sent := f.s.Status().Sent
	if sent != 1 && sent != 2 {
		t.Fatalf("%d messages for two publishes of one state", sent)
	}
	for range sent {
		checkSourcedState(t, c.Next(t))
	}
	c.ExpectNone(t)
}

func checkSourcedState(t *testing.T, b []byte) {
	t.Helper()
	var raw struct {
		Updates []struct {
			Source json.RawMessage
			Values []struct {
				Path  string
				Value float64
			}
		}
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Updates) != 1 || len(raw.Updates[0].Values) != 1 {
		t.Fatalf("not a delta with one value: %s (%v)", b, err)
	}
	u := raw.Updates[0]
	if string(u.Source) != `{"label":"dev.probe-1","type":"NMEA2000","src":"48","pgn":127501}` ||
		u.Values[0].Path != "electrical.switches.bank.2.3.state" || u.Values[0].Value != 1 {
		t.Fatalf("state published as %s", b)
	}
}

// sourceTailLen counts what appendSourceTail writes.
func TestSourceTailLen(t *testing.T) {
	for _, src := range []sk.Source{
		{},
		{Type: "NMEA2000", Src: "35", PGN: gpsPGN},
		{Type: "NMEA2000", Src: "0", PGN: 1, Instance: "port-1"},
		{Type: "Plugin", Src: "a"},
	} {
		if got, want := sourceTailLen(&src), len(appendSourceTail(nil, &src)); got != want {
			t.Errorf("%+v: %d, want %d", src, got, want)
		}
	}
}
