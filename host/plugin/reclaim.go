package plugin

import (
	"runtime/debug"
	"sync"
)

// reclaimer runs debug.FreeOSMemory on goroutines of its own, one after the other, so that
// the caller goes on while the heap is collected and its free pages are handed back; wait
// returns once every run started before it has ended. Each run is owned by the reclaimer
// and ends by itself: a forced collection and a scavenge, tens of milliseconds.
type reclaimer struct {
	mu   sync.Mutex
	done chan struct{} // closed when the last run started has ended; nil before the first
}

// start begins a run, after the one before it.
func (r *reclaimer) start() {
	d := make(chan struct{})
	r.mu.Lock()
	prev := r.done
	r.done = d
	r.mu.Unlock()
	go func() {
		defer close(d)
		if prev != nil {
			<-prev
		}
		debug.FreeOSMemory()
	}()
}

// wait returns once the runs started so far have ended.
func (r *reclaimer) wait() {
	r.mu.Lock()
	d := r.done
	r.mu.Unlock()
	if d != nil {
		<-d
	}
}
