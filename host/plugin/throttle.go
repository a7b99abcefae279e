package plugin

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/foreground"
)

// The device is a management appliance: its API must answer at full speed while a plugin
// burns CPU. Plugin code therefore runs at a lower priority than the API, in three layers:
// the worker's thread runs at nice 10 (prio_linux.go), a call running long lends the process
// a GOMAXPROCS slot (procs.go), and, here, a call that has run past throttleGrace gives way
// whenever the device's own API has a request in flight (package foreground): after every
// throttleSlice it runs, it parks for throttlePark, so that it takes at most a sixteenth of
// the time while the API is busy. The kernel's priorities alone left the API about four
// fifths of its idle throughput on a two-core device (BenchmarkHTTPWhileSpinning), since a
// spinning call keeps one of the two GOMAXPROCS slots and one core's worth of runnable
// thread. While the API is idle a call runs unthrottled.
//
// A call's time limit counts the time it ran, not the time it was held back, so that
// throttling never makes a legitimate call fail: a plugin spinning into its limit is stopped
// after CallTimeout of its own running, which is at most maxStretch times CallTimeout of wall
// time when the API is busy all along (the meter ends a call at that wall time too, as a
// backstop: checked here at each refuel rather than by a timer per call, which cost every
// call a wake-up of an idle thread). A stop ends a parked call at once.
const (
	throttleGrace = 2 * time.Millisecond
	throttleSlice = time.Millisecond
	throttlePark  = 15 * time.Millisecond
	maxStretch    = (throttleSlice + throttlePark) / throttleSlice
)

// callMeter measures one call's running time against its limit and throttles it; its check
// runs at every refuel, on the worker goroutine, so it needs no lock.
type callMeter struct {
	clk    clockwork.Clock
	busy   func() bool // the API has requests in flight
	limit  time.Duration
	start  time.Time
	parked time.Duration // time held back, not counted against the limit
	slice  time.Time     // when the call last resumed
	// lender, when set, lends the call a GOMAXPROCS slot once it has run longCallAfter
	// (procs.go); end gives the slot back.
	lender *procLender
	long   longCall
}

func newCallMeter(clk clockwork.Clock, busy func() bool, limit time.Duration) *callMeter {
	now := clk.Now()
	return &callMeter{clk: clk, busy: busy, limit: limit, start: now, slice: now}
}

// realMeter is the meter of a call in service: the real clock, the API's requests and the
// process's GOMAXPROCS lender.
func realMeter(limit time.Duration) *callMeter {
	m := newCallMeter(realClock, foreground.Busy, limit)
	m.lender = lender
	return m
}

// end is the end of the call: a slot it was lent goes back.
func (m *callMeter) end() {
	if m.lender != nil {
		m.lender.endCall(&m.long)
	}
}

var realClock = clockwork.NewRealClock()

// ran is how long the call has run by now.
func (m *callMeter) ran(now time.Time) time.Duration { return now.Sub(m.start) - m.parked }

// check answers context.DeadlineExceeded once the call has run its limit (or maxStretch
// times it in wall time) and ctx's error once it ended (a stop); otherwise it lends the call
// a slot when it runs long and parks it first when it is to give way to the API.
func (m *callMeter) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := m.clk.Now()
	wall := now.Sub(m.start)
	if m.lender != nil && wall >= longCallAfter {
		m.lender.ranLong(&m.long)
	}
	ran := m.ran(now)
	if ran >= m.limit || wall >= m.limit*maxStretch {
		return context.DeadlineExceeded
	}
	if ran < throttleGrace || now.Sub(m.slice) < throttleSlice || !m.busy() {
		return nil
	}
	t := m.clk.NewTimer(throttlePark)
	select {
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	case <-t.Chan():
	}
	m.slice = m.clk.Now()
	m.parked += m.slice.Sub(now)
	return nil
}
