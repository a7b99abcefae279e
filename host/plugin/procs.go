package plugin

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A plugin call is a goroutine that is always runnable until it returns, so Go's scheduler
// gives it a whole P (one of the GOMAXPROCS slots that run Go code) for as long as it spins:
// on a two-core device the HTTP server and the Signal K client would be left one slot, and the
// worker thread's lower priority would not matter, since the kernel never sees more runnable
// threads than cores. A call that runs past longCallAfter therefore lends the process one more
// slot while it runs (at most maxLentProcs in all): then the kernel does see the contention and
// favours the host's threads over the plugin's. Short calls, the common case, only arm and stop
// a timer; changing GOMAXPROCS stops the world, which a long call can afford.
const (
	longCallAfter = 5 * time.Millisecond
	maxLentProcs  = 4
)

// procLender counts the calls running long and sets GOMAXPROCS from them; it is process-wide
// because GOMAXPROCS is.
type procLender struct {
	// afterFunc is time.AfterFunc; tests replace it.
	afterFunc func(time.Duration, func()) func() bool
	// setProcs applies a slot count; restore goes back to base after the last long call (the
	// runtime's own choice unless GOMAXPROCS is set in the environment). Tests replace them.
	setProcs func(n int)
	restore  func(base int)
	// procs reads the current slot count; tests replace it.
	procs func() int

	mu   sync.Mutex
	base int // GOMAXPROCS before the first long call of a run of them
	long int // calls running past longCallAfter
}

var lender = &procLender{
	afterFunc: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop },
	setProcs:  func(n int) { runtime.GOMAXPROCS(n) },
	restore: func(base int) {
		if os.Getenv("GOMAXPROCS") == "" {
			// The runtime's own choice follows CPU limits as they change; a fixed number
			// would end that.
			runtime.SetDefaultGOMAXPROCS()
			return
		}
		runtime.GOMAXPROCS(base)
	},
	procs: func() int { return runtime.GOMAXPROCS(0) },
}

// longCall is one call being watched.
type longCall struct {
	state atomic.Int32 // callRunning, callLong or callEnded
	stop  func() bool
}

const (
	callRunning = iota
	callLong
	callEnded
)

// startCall watches a call that begins now; endCall must follow when it returns.
func (l *procLender) startCall() *longCall {
	c := &longCall{}
	c.stop = l.afterFunc(longCallAfter, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if c.state.CompareAndSwap(callRunning, callLong) {
			l.setLocked(l.long + 1)
		}
	})
	return c
}

func (l *procLender) endCall(c *longCall) {
	c.stop()
	if c.state.CompareAndSwap(callRunning, callEnded) {
		return
	}
	// The timer fired and lent a slot: give it back.
	l.mu.Lock()
	defer l.mu.Unlock()
	c.state.Store(callEnded)
	l.setLocked(l.long - 1)
}

func (l *procLender) setLocked(long int) {
	if l.long == 0 && long > 0 {
		l.base = l.procs()
	}
	l.long = long
	if long > 0 {
		l.setProcs(l.base + min(long, maxLentProcs))
		return
	}
	l.restore(l.base)
}
