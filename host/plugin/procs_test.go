package plugin

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeLender records what a lender would do to GOMAXPROCS, with timers the test fires.
type fakeLender struct {
	*procLender
	mu     sync.Mutex
	timers []func()
	log    []int // slot counts set; -1 for a restore
}

func newFakeLender(procs int) *fakeLender {
	f := &fakeLender{}
	f.procLender = &procLender{
		afterFunc: func(d time.Duration, fn func()) func() bool {
			if d != longCallAfter {
				panic("unexpected delay")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			i := len(f.timers)
			f.timers = append(f.timers, fn)
			return func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				stopped := f.timers[i] != nil
				f.timers[i] = nil
				return stopped
			}
		},
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

// fire runs timer i as the clock would.
func (f *fakeLender) fire(i int) {
	f.mu.Lock()
	fn := f.timers[i]
	f.timers[i] = nil
	f.mu.Unlock()
	if fn != nil {
		fn()
	}
}

func TestLenderShortCallsLendNothing(t *testing.T) {
	f := newFakeLender(2)
	c := f.startCall()
	f.endCall(c)
	f.fire(0) // stopped: nothing happens
	if len(f.log) != 0 {
		t.Fatalf("a short call changed GOMAXPROCS: %v", f.log)
	}
}

func TestLenderLendsPerLongCall(t *testing.T) {
	f := newFakeLender(2)
	a, b := f.startCall(), f.startCall()
	f.fire(0) // a runs long
	f.fire(1) // b runs long
	f.endCall(a)
	c := f.startCall()
	f.endCall(c) // short: no change
	f.endCall(b)
	if want := []int{3, 4, 3, -1}; !slices.Equal(f.log, want) {
		t.Fatalf("GOMAXPROCS steps %v, want %v", f.log, want)
	}
}

func TestLenderBoundsTheLoan(t *testing.T) {
	f := newFakeLender(2)
	var calls []*longCall
	for i := range maxLentProcs + 2 {
		calls = append(calls, f.startCall())
		f.fire(i)
	}
	for _, c := range calls {
		f.endCall(c)
	}
	if top := slices.Max(f.log); top != 2+maxLentProcs {
		t.Fatalf("lent up to %d slots over 2: %v", top-2, f.log)
	}
	if f.log[len(f.log)-1] != -1 || f.long != 0 {
		t.Fatalf("not restored after the last call: %v (long %d)", f.log, f.long)
	}
}

// A timer firing while its call ends settles either way without a slot lost or kept.
func TestLenderTimerRacingTheEnd(t *testing.T) {
	for range 200 {
		f := newFakeLender(2)
		c := f.startCall()
		var wg sync.WaitGroup
		wg.Go(func() { f.fire(0) })
		f.endCall(c)
		wg.Wait()
		if f.long != 0 || (len(f.log) != 0 && !slices.Equal(f.log, []int{3, -1})) {
			t.Fatalf("steps %v, long %d", f.log, f.long)
		}
	}
}
