package skstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"devhost/host/sk"
)

const (
	ctxA = "vessels.urn:mrn:imo:mmsi:230123456"
	ctxB = "atons.urn:mrn:imo:mmsi:992351000"
)

// One batch window sends one message per context: the own vessel's first, then the others
// in the order they joined; within a context the last value of a path wins and the root
// values are all kept.
func TestPublishContextOneMessagePerContext(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	must(t, f.s.PublishContext(ctxA, sk.Value{Path: "navigation.speedOverGround", Value: 1.0},
		sk.Value{Path: "", Value: json.RawMessage(`{"mmsi":"230123456"}`)}))
	must(t, f.s.PublishNumber("navigation.speedOverGround", 7))
	must(t, f.s.PublishContext(ctxB, sk.Value{Path: "navigation.position", Value: json.RawMessage(`{"latitude":60.1,"longitude":24.9}`)}))
	must(t, f.s.PublishContext(ctxA, sk.Value{Path: "navigation.speedOverGround", Value: 2.5},
		sk.Value{Path: "", Value: json.RawMessage(`{"name":"ILMATAR"}`)}))
	f.advance(1, 100*time.Millisecond)
	for _, want := range []struct {
		ctx    string
		values []string
	}{
		{"vessels.self", []string{"navigation.speedOverGround=7"}},
		{ctxA, []string{"navigation.speedOverGround=2.5", `={"mmsi":"230123456"}`, `={"name":"ILMATAR"}`}},
		{ctxB, []string{`navigation.position={"latitude":60.1,"longitude":24.9}`}},
	} {
		d := nextDelta(t, c)
		if d.Context != want.ctx || !slices.Equal(d.values(), want.values) || d.Updates[0].Source.Label != "dev.probe-1" {
			t.Fatalf("delta %s %v, want %s %v", d.Context, d.values(), want.ctx, want.values)
		}
	}
	c.ExpectNone(t)
	eventually(t, "sent 3", func() bool { return f.s.Status().Sent == 3 })
}

// A context's values wait in the same ring as the own vessel's while the server is away, are
// dropped oldest first under the same budget, and drain after the connect.
func TestPublishContextOfflineRing(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.BufferMsgs, s.DrainPerS = 0, 3, 1000 }))
	must(t, f.s.PublishNumber("p.n", 1))
	for i := 2; i <= 4; i++ {
		must(t, f.s.PublishContext(ctxA, sk.Value{Path: "p.n", Value: float64(i)}))
	}
	if st := f.s.Status(); st.Buffered != 3 || st.Dropped != 1 {
		t.Fatalf("status %+v", st)
	}
	c := f.connect()
	for i := 2; i <= 4; i++ {
		b := f.pump(c, time.Millisecond)
		var d wireDelta
		if err := json.Unmarshal(b, &d); err != nil || d.Context != ctxA {
			t.Fatalf("drained %s (%v)", b, err)
		}
		if got := d.values(); !slices.Equal(got, []string{fmt.Sprintf("p.n=%d", i)}) {
			t.Fatalf("drained %v", got)
		}
	}
}

// A context's message is at most MaxMessageBytes: one that fills goes out by itself while
// the window stays open for the others.
func TestPublishContextFullMessage(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	big := strings.Repeat("x", 6000)
	must(t, f.s.PublishNumber("a.b", 1))
	for i := range 3 {
		must(t, f.s.PublishContext(ctxA, sk.Value{Path: fmt.Sprintf("p.s%d", i), Value: big}))
	}
	d := nextDelta(t, c) // the first two values, sent before the third could not fit
	if d.Context != ctxA || len(d.Updates[0].Values) != 2 {
		t.Fatalf("early message %s with %d values", d.Context, len(d.Updates[0].Values))
	}
	c.ExpectNone(t)
	f.advance(1, 100*time.Millisecond)
	if d := nextDelta(t, c); d.Context != "vessels.self" {
		t.Fatalf("then %s", d.Context)
	}
	if d := nextDelta(t, c); d.Context != ctxA || len(d.Updates[0].Values) != 1 {
		t.Fatalf("then %s with %d values", d.Context, len(d.Updates[0].Values))
	}
}

// A batch holds at most MaxBatchContexts other contexts: one more closes it early.
func TestPublishContextBatchCap(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	for i := range MaxBatchContexts + 1 {
		must(t, f.s.PublishContext(fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", i), sk.Value{Path: "a.b", Value: 1.0}))
	}
	for i := range MaxBatchContexts {
		if d := nextDelta(t, c); d.Context != fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", i) {
			t.Fatalf("message %d: %s", i, d.Context)
		}
	}
	c.ExpectNone(t)
	f.advance(1, 100*time.Millisecond)
	if d := nextDelta(t, c); d.Context != fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", MaxBatchContexts) {
		t.Fatalf("last: %s", d.Context)
	}
}

func TestPublishContextRefuses(t *testing.T) {
	f := newFixture(t)
	for name, err := range map[string]error{
		"context with a space": f.s.PublishContext("vessels.a b", sk.Value{Path: "a.b", Value: 1.0}),
		"context with a quote": f.s.PublishContext(`vessels.a"`, sk.Value{Path: "a.b", Value: 1.0}),
		"empty segment":        f.s.PublishContext("vessels..x", sk.Value{Path: "a.b", Value: 1.0}),
		"root number":          f.s.PublishContext(ctxA, sk.Value{Path: "", Value: 1.0}),
		"root array":           f.s.PublishContext(ctxA, sk.Value{Path: "", Value: json.RawMessage(`[1]`)}),
		"own vessel root":      f.s.PublishValues(sk.Value{Path: "", Value: json.RawMessage(`{"name":"x"}`)}),
		"bad path, good first": f.s.PublishContext(ctxA, sk.Value{Path: "a.b", Value: 1.0}, sk.Value{Path: "a..b", Value: 1.0}),
		"too large":            f.s.PublishContext(ctxA, sk.Value{Path: "a.b", Value: strings.Repeat("x", MaxMessageBytes)}),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	f.clk.Advance(time.Second)
	if st := f.s.Status(); st.Buffered != 0 {
		t.Fatalf("refused values were queued: %+v", st)
	}
}
