package plugin

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// fakeLender records what a lender would do to GOMAXPROCS.
type fakeLender struct {
	*procLender
	log []int // slot counts set; -1 for a restore
}

func newFakeLender(procs int) *fakeLender {
	f := &fakeLender{}
	f.procLender = &procLender{
		setProcs: func(n int) { f.log = append(f.log, n) },
		restore: func(base int) {
			if base != procs {
				panic("restored to the wrong base")
			}
			f.log = append(f.log, -1)
		},
		procs: func() int { return procs },
	}
	return f
}

func TestLenderShortCallsLendNothing(t *testing.T) {
	f := newFakeLender(2)
	var c longCall
	f.endCall(&c)
	if len(f.log) != 0 {
		t.Fatalf("a short call changed GOMAXPROCS: %v", f.log)
	}
}

func TestLenderLendsPerLongCall(t *testing.T) {
	f := newFakeLender(2)
	var a, b, c longCall
	f.ranLong(&a)
	f.ranLong(&b)
	f.ranLong(&a) // seen long again: still one slot
	f.endCall(&a)
	f.endCall(&c) // short: no change
	f.endCall(&b)
	if want := []int{3, 4, 3, -1}; !slices.Equal(f.log, want) {
		t.Fatalf("GOMAXPROCS steps %v, want %v", f.log, want)
	}
}

func TestLenderBoundsTheLoan(t *testing.T) {
	f := newFakeLender(2)
	calls := make([]longCall, maxLentProcs+2)
	for i := range calls {
		f.ranLong(&calls[i])
	}
	for i := range calls {
		f.endCall(&calls[i])
	}
	if top := slices.Max(f.log); top != 2+maxLentProcs {
		t.Fatalf("lent up to %d slots over 2: %v", top-2, f.log)
	}
	if f.log[len(f.log)-1] != -1 || f.long != 0 {
		t.Fatalf("not restored after the last call: %v (long %d)", f.log, f.long)
	}
}

// The call's meter lends the slot at the first refuel past longCallAfter, once, and its end
// gives it back.
func TestCallMeterLendsWhenLong(t *testing.T) {
	f := newFakeLender(2)
	clk := clockwork.NewFakeClock()
	m := newCallMeter(clk, func() bool { return false }, time.Second)
	m.lender = f.procLender
	steps := []struct {
		advance time.Duration
		want    []int
	}{
		{longCallAfter - time.Millisecond, nil},
		{time.Millisecond - 1, nil},
		{1, []int{3}},
		{10 * time.Millisecond, []int{3}},
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		if err := m.check(context.Background()); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !slices.Equal(f.log, st.want) {
			t.Fatalf("step %d: GOMAXPROCS steps %v, want %v", i, f.log, st.want)
		}
	}
	m.end()
	if want := []int{3, -1}; !slices.Equal(f.log, want) || f.long != 0 {
		t.Fatalf("after the call: steps %v (long %d), want %v", f.log, f.long, want)
	}
}
