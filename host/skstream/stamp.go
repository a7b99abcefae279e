package skstream

import (
	"math"
	"time"
)

// wallRefresh is how long one reading of the device clock (Options.WallClock) serves the
// measurement times of published values. In between, the time is carried forward with the
// stream's own clock, which is as exact as reading the device clock again (the device clock
// is itself a wall time plus the monotonic time since it was set) at a fraction of the cost:
// a wall clock read is the largest single cost of a published value on some machines (about
// 200 ns on a KVM guest against 40 ns for the monotonic clock). A set or step of the device
// clock reaches the stamps within this time.
const wallRefresh = 100 * time.Millisecond

// noStamp is the stamp of a value published without a measurement time (timestamps off or
// the device clock not set). It is below every real stamp, so the newest stamp of a message
// is its largest.
const noStamp = math.MinInt64

// wallReading is one reading of the device clock and the stream clock's time at that moment.
type wallReading struct {
	wall int64     // the device clock in Unix nanoseconds; noStamp: it was not set
	at   time.Time // Stream.clk.Now() when wall was read
	// mono: at carries a monotonic clock reading, so it came from the real clock and
	// time.Since(at) reads only the monotonic clock. clockwork's real Since reads the wall
	// clock too, which is the cost this saves; a fake clock's times carry none.
	mono bool
}

// since is the stream clock's time since r was taken.
func (r *wallReading) since(s *Stream) time.Duration {
	if r.mono {
		return time.Since(r.at)
	}
	return s.clk.Since(r.at)
}

// stamp is the measurement time for values published now in Unix nanoseconds, or noStamp
// without timestamps. An integer rather than a time.Time: it is taken for every published
// value and kept as the newest of its message under the stream's lock, where a time.Time's
// addition and comparison cost more than the integer ones; the device clock's years (1678 to
// 2262) fit.
func (s *Stream) stamp() int64 {
	if !s.timestamps.Load() || s.opts.WallClock == nil {
		return noStamp
	}
	if r := s.wallRead.Load(); r != nil {
		if d := r.since(s); d >= 0 && d < wallRefresh {
			if r.wall == noStamp {
				return noStamp
			}
			return r.wall + int64(d)
		}
	}
	at := s.clk.Now()
	// Round(0) strips a monotonic reading; a time without one comes back unchanged.
	r := &wallReading{wall: noStamp, at: at, mono: at != at.Round(0)}
	if t, ok := s.opts.WallClock(); ok {
		r.wall = t.UnixNano()
	}
	s.wallRead.Store(r)
	return r.wall
}

// stampTime is a stamp as the time appendDelta writes: the zero time for noStamp.
func stampTime(ts int64) time.Time {
	if ts == noStamp {
		return time.Time{}
	}
	return time.Unix(0, ts)
}
