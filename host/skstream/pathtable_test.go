package skstream

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"devhost/host/sk"
)

// A slot is current only in the message it was placed in; a table past its bound starts over,
// but only while its message is empty, so no slot handed out for an open message goes stale.
func TestPathTableSlots(t *testing.T) {
	tb := newPathTable()
	if _, ok := tb.lookup("a.b", false); ok {
		t.Fatal("an empty table knows a.b")
	}
	k := tb.add("a.b")
	if _, ok := tb.current(k); ok {
		t.Fatal("a new slot is in the open message before it was placed")
	}
	tb.place(k, 7)
	if got, ok := tb.lookup("a.b", true); !ok || got != k {
		t.Fatalf("lookup of a.b: %d %v, want %d", got, ok, k)
	}
	if i, ok := tb.current(k); !ok || i != 7 {
		t.Fatalf("current of a.b: %d %v, want 7", i, ok)
	}
	tb.next()
	if _, ok := tb.current(k); ok {
		t.Fatal("a slot of the previous message is current")
	}
	if _, ok := tb.current(noSlot); ok {
		t.Fatal("noSlot is current")
	}

	for i := range maxKnownPaths {
		tb.add(fmt.Sprintf("p.%d", i))
	}
	if _, ok := tb.lookup("a.b", true); !ok {
		t.Fatal("a table over its bound was emptied while its message was open")
	}
	if _, ok := tb.lookup("a.b", false); ok {
		t.Fatal("a table over its bound was kept for an empty message")
	}
	if len(tb.slot) != 0 || len(tb.slots) != 0 {
		t.Fatalf("after the reset the table holds %d paths, %d slots", len(tb.slot), len(tb.slots))
	}
}

// The own vessel's path table outlives a message but not its bound: past maxKnownPaths paths
// it starts over, and a path still goes out once per message with its last value. A path it
// refused is refused again.
func TestPathTableLastValueAcrossItsReset(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) {
		s.BatchMS, s.BufferMsgs, s.BufferKB = 0, 1024, 1024
	}))
	c := f.connect()
	const perMessage = 200
	messages := maxKnownPaths/perMessage + 1
	for m := range messages {
		vs := make([]sk.Value, perMessage)
		for i := range vs {
			vs[i] = sk.Value{Path: fmt.Sprintf("fill.m%d.p%d", m, i), Value: i}
		}
		must(t, f.s.PublishValues(vs...))
		if got := len(nextDelta(t, c).values()); got != perMessage {
			t.Fatalf("message %d holds %d values, want %d", m, got, perMessage)
		}
	}
	f.s.mu.Lock()
	known := len(f.s.self.paths.slots)
	f.s.mu.Unlock()
	if known <= maxKnownPaths {
		t.Fatalf("the table knows %d paths after %d, want more than %d", known, messages*perMessage, maxKnownPaths)
	}

	must(t, f.s.PublishValues(sk.Value{Path: "fill.m0.p0", Value: 1}, sk.Value{Path: "c.d", Value: 2},
		sk.Value{Path: "fill.m0.p0", Value: 3}))
	if got, want := nextDelta(t, c).values(), []string{"fill.m0.p0=3", "c.d=2"}; !slices.Equal(got, want) {
		t.Fatalf("after the reset: %v, want %v", got, want)
	}
	f.s.mu.Lock()
	known = len(f.s.self.paths.slots)
	f.s.mu.Unlock()
	if known != 2 {
		t.Fatalf("the table knows %d paths after the reset, want 2", known)
	}
	for range 2 {
		if err := f.s.PublishNumber("a..b", 1); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("a..b: %v, want ErrInvalidArgument", err)
		}
	}
}
