package plugin

import (
	"sync"
	"time"

	"devhost/abi"
)

// MaxQueued bounds the bytes of events waiting for one plugin. Beyond it, new deltas, CAN
// frames and BLE adverts are dropped (and counted), HTTP requests answered 503 and inbound
// PUTs answered failure, so a stuck plugin cannot make the host grow without bound.
const MaxQueued = 4 << 20

// CAN frames wait up to CANGather for company before the plugin is called, unless
// CANGatherFrames of them are queued or another kind of event comes: a full NMEA 2000 bus
// carries about 1,850 frames a second, and a call per frame cost the host a worker wake-up
// and the plugin its per-call work (reading the batch, flushing its values) for every frame.
// At 10 ms those still were a third of the CPU the device spent on a full bus (100 calls a
// second of about 18 frames each); 50 ms is a fifth of the calls and still well below what
// a bus protocol waits for an answer (J1939 and NMEA 2000 expect one within 200 ms, an
// address claim waits 250 ms).
const (
	CANGather       = 50 * time.Millisecond
	CANGatherFrames = 256
)

// queued is one pending event for a plugin.
type queued struct {
	kind    abi.EventKind
	payload []byte
	http    *httpReq // EvHTTP
	put     *putReq  // EvPut
	req     *waitReq // EvGATT and EvPortal requests
	timer   uint32   // EvTimer
	n       int      // EvDelta: value records in payload
	done    func()   // when set, called once the event was delivered (or dropped)
}

// inbox holds what is waiting for a plugin's next batch. Producers are the host's other
// goroutines (Signal K, timers, the board, HTTP handlers); the consumer is the plugin's worker.
// Every event belongs to one instance generation: events of an instance already discarded
// are dropped at the door.
type inbox struct {
	mu       sync.Mutex
	gen      uint64
	q        []queued
	bytes    int
	config   bool            // the namespace's values changed since the last batch
	timers   map[uint32]bool // timer ids with a firing queued
	dropped  uint64
	kick     chan struct{}
	accepted bool // an instance is running and takes events
	// CAN frames held back (see CANGather): how many are queued unsignalled, and whether
	// gather, the timer that ends the gathering, is armed. Its channel, due, is the worker's
	// to select, which then calls flushHeld: the firing wakes the worker itself, not a
	// goroutine of its own that would wake the worker in turn (time.AfterFunc), a thread
	// wake-up saved 20 times a second on a busy bus. Tests replace both.
	held     int
	gathered bool
	gather   gatherTimer
	due      <-chan time.Time
	handed   []queued // what take answered last, see take
}

// gatherTimer is the part of *time.Timer the inbox uses.
type gatherTimer interface {
	Reset(time.Duration) bool
	Stop() bool
}

func newInbox() *inbox {
	t := time.NewTimer(CANGather)
	t.Stop()
	return &inbox{kick: make(chan struct{}, 1), timers: map[uint32]bool{}, gather: t, due: t.C}
}

func (b *inbox) signal() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// open starts a new generation and returns it; close ends it, handing back what was queued.
func (b *inbox) open() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.accepted = true
	return b.gen
}

func (b *inbox) close() []queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.accepted = false
	b.release()
	q := b.q
	b.q, b.handed, b.bytes, b.config = nil, nil, 0, false
	b.timers = map[uint32]bool{}
	return q
}

// push queues an event for generation gen. It reports false when the event was not taken
// (wrong generation, no instance, or the inbox full).
func (b *inbox) push(gen uint64, e queued) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.accepted || gen != b.gen {
		return false
	}
	if b.bytes+len(e.payload) > MaxQueued {
		b.dropped++
		return false
	}
	if e.kind == abi.EvTimer {
		if b.timers[e.timer] {
			return true // a periodic timer whose last firing is still queued
		}
		b.timers[e.timer] = true
	}
	// Consecutive deltas share one record: fewer headers, one decode in the plugin.
	if e.kind == abi.EvDelta && len(b.q) > 0 {
		last := &b.q[len(b.q)-1]
		if last.kind == abi.EvDelta && last.n+e.n <= abi.MaxValuesPerCall && len(last.payload)+len(e.payload) <= abi.MaxEventBatch/4 {
			last.payload = append(last.payload, e.payload...)
			last.n += e.n
			b.bytes += len(e.payload)
			b.signal()
			return true
		}
	}
	b.q = append(b.q, e)
	b.bytes += len(e.payload)
	if e.kind == abi.EvCAN && b.held+1 < CANGatherFrames {
		b.held++
		if !b.gathered {
			b.gathered = true
			b.gather.Reset(CANGather)
		}
		return true
	}
	b.release()
	b.signal()
	return true
}

// flushHeld signals the CAN frames held back once CANGather is over (due fired).
func (b *inbox) flushHeld() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gathered {
		b.gathered, b.held = false, 0
		b.signal()
	}
}

// release disarms the gathering timer: what is queued goes with the next batch. The caller
// holds mu.
func (b *inbox) release() {
	if b.gathered {
		b.gather.Stop()
	}
	b.gathered, b.held = false, 0
}

// markConfig notes that the namespace's values changed.
func (b *inbox) markConfig(gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.accepted && gen == b.gen {
		b.config = true
		b.signal()
	}
}

// empty reports whether nothing waits for the next batch.
func (b *inbox) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.q) == 0 && !b.config
}

// dropTimer forgets a queued firing of a cancelled timer.
func (b *inbox) dropTimer(id uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.timers[id] {
		return
	}
	delete(b.timers, id)
	for i, e := range b.q {
		if e.kind == abi.EvTimer && e.timer == id {
			b.bytes -= len(e.payload)
			b.q = append(b.q[:i:i], b.q[i+1:]...)
			return
		}
	}
}

// take removes the events of the next batch: as many as fit MaxEventBatch (at least one),
// in order. config reports a pending configuration change, which the caller appends.
func (b *inbox) take() (evs []queued, config bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	size := 0
	n := 0
	for n < len(b.q) {
		sz := abi.EventHeader + len(b.q[n].payload)
		if n > 0 && size+sz > abi.MaxEventBatch-64<<10 {
			break
		}
		size += sz
		n++
	}
	// The worker is done with the batch it took last (it takes the next only after that one
	// was delivered): its array holds the queue from now on, so a busy bus does not grow a
	// new queue event by event for every batch.
	rest := b.handed[:cap(b.handed)]
	clear(rest)
	rest = append(rest[:0], b.q[n:]...)
	evs = b.q[:n:n]
	b.q, b.handed = rest, evs
	for _, e := range evs {
		b.bytes -= len(e.payload)
		if e.kind == abi.EvTimer {
			delete(b.timers, e.timer)
		}
	}
	config, b.config = b.config, false
	b.release()
	if len(b.q) > 0 {
		b.signal()
	}
	return evs, config
}

func (b *inbox) droppedCount() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}
