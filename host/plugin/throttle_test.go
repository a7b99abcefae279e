package plugin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// checkAsync runs m.check on a goroutine of its own, as the worker would, and answers its
// result.
func checkAsync(ctx context.Context, m *callMeter) <-chan error {
	done := make(chan error, 1)
	go func() { done <- m.check(ctx) }()
	return done
}

// parkedCheck runs a check that must park: it waits for the park's timer, moves the fake
// clock past it and answers the check's result.
func parkedCheck(t *testing.T, clk *clockwork.FakeClock, m *callMeter) error {
	t.Helper()
	done := checkAsync(context.Background(), m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the check did not park")
	}
	clk.Advance(throttlePark)
	return <-done
}

// With the API idle a call is never held back, and it ends exactly at its limit.
func TestCallMeterIdleRunsFree(t *testing.T) {
	clk := clockwork.NewFakeClock()
	m := newCallMeter(clk, func() bool { return false }, 100*time.Millisecond)
	for range 99 {
		clk.Advance(time.Millisecond)
		if err := m.check(context.Background()); err != nil {
			t.Fatalf("after %v: %v", m.ran(clk.Now()), err)
		}
	}
	clk.Advance(time.Millisecond)
	if err := m.check(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("at the limit: %v, want the deadline", err)
	}
}

// With the API busy a call runs its grace, then parks throttlePark after every
// throttleSlice of running; the time parked does not count against the limit.
func TestCallMeterGivesWayToTheAPI(t *testing.T) {
	clk := clockwork.NewFakeClock()
	limit := 10 * time.Millisecond
	m := newCallMeter(clk, func() bool { return true }, limit)
	steps := []struct {
		advance time.Duration
		parks   bool
	}{
		{time.Millisecond, false},                // within the grace
		{throttleGrace - time.Millisecond, true}, // the grace is over
		{throttleSlice / 2, false},               // half a slice after resuming
		{throttleSlice / 2, true},                // a whole slice
		{throttleSlice, true},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		var err error
		if s.parks {
			err = parkedCheck(t, clk, m)
		} else {
			err = m.check(context.Background())
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	ran := throttleGrace + 2*throttleSlice
	if got := m.ran(clk.Now()); got != ran {
		t.Errorf("ran %v, want %v: the parks counted", got, ran)
	}
	if got := clk.Since(m.start); got != ran+3*throttlePark {
		t.Errorf("%v of wall time, want %v", got, ran+3*throttlePark)
	}
	// Running on, slice after slice, the call ends once it has run its limit.
	var err error
	for err == nil {
		clk.Advance(throttleSlice)
		if m.ran(clk.Now()) >= limit {
			err = m.check(context.Background())
			break
		}
		err = parkedCheck(t, clk, m)
	}
	if !errors.Is(err, context.DeadlineExceeded) || m.ran(clk.Now()) != limit {
		t.Errorf("ended with %v after running %v, want the deadline at %v", err, m.ran(clk.Now()), limit)
	}
	if wall := clk.Since(m.start); wall > limit*maxStretch {
		t.Errorf("%v of wall time for a %v limit, at most %v", wall, limit, limit*maxStretch)
	}
}

// A stop ends a parked call at once, without the clock moving.
func TestCallMeterStopWhileParked(t *testing.T) {
	clk := clockwork.NewFakeClock()
	m := newCallMeter(clk, func() bool { return true }, time.Second)
	clk.Advance(throttleGrace)
	ctx, stop := context.WithCancel(context.Background())
	done := checkAsync(ctx, m)
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(wait, 1); err != nil {
		t.Fatal("the check did not park")
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped while parked: %v", err)
	}
	if err := m.check(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("after the stop: %v", err)
	}
}

// A call held back far longer than its parks (a loaded machine waking it late) still ends
// at maxStretch times its limit of wall time, though it ran less than its limit.
func TestCallMeterWallBackstop(t *testing.T) {
	clk := clockwork.NewFakeClock()
	limit := 10 * time.Millisecond
	m := newCallMeter(clk, func() bool { return true }, limit)
	clk.Advance(throttleGrace)
	done := checkAsync(context.Background(), m)
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(wait, 1); err != nil {
		t.Fatal("the check did not park")
	}
	clk.Advance(limit * maxStretch)
	if err := <-done; err != nil {
		t.Fatalf("resumed: %v", err)
	}
	if ran := m.ran(clk.Now()); ran >= limit {
		t.Fatalf("ran %v, the parks counted", ran)
	}
	if err := m.check(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after %v of wall time: %v, want the deadline", clk.Since(m.start), err)
	}
}
