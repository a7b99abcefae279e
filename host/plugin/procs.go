package plugin

import (
	"os"
	"runtime"
	"sync"
	"time"
)

// A plugin call is a goroutine that is always runnable until it returns, so Go's scheduler
// gives it a whole P (one of the GOMAXPROCS slots that run Go code) for as long as it spins:
// on a two-core device the HTTP server and the Signal K client would be left one slot, and the
// worker thread's lower priority would not matter, since the kernel never sees more runnable
// threads than cores. A call that runs past longCallAfter therefore lends the process one more
// slot while it runs (at most maxLentProcs in all): then the kernel does see the contention and
// favours the host's threads over the plugin's. Changing GOMAXPROCS stops the world, which a
// long call can afford. The call's meter notices the call running long at a refuel (every ten
// to a hundred microseconds of plugin code, throttle.go): a timer per call instead cost a
// short call, the common case, a wake-up of an idle thread to arm it, and another when its
// deadline passed after it had been stopped.
const (
	longCallAfter = 5 * time.Millisecond
	maxLentProcs  = 4
)

// procLender counts the calls running long and sets GOMAXPROCS from them; it is process-wide
// because GOMAXPROCS is.
type procLender struct {
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
	setProcs: func(n int) { runtime.GOMAXPROCS(n) },
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

// longCall is one call being watched. Its methods run on the goroutine that makes the call.
type longCall struct {
	lent bool // the call ran long and holds a slot
}

// ranLong lends the call c a slot, once it has run longCallAfter; endCall must follow when
// it returns.
func (l *procLender) ranLong(c *longCall) {
	if c.lent {
		return
	}
	c.lent = true
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(l.long + 1)
}

// endCall gives back the slot c was lent, if any.
func (l *procLender) endCall(c *longCall) {
	if !c.lent {
		return
	}
	c.lent = false
	l.mu.Lock()
	defer l.mu.Unlock()
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
