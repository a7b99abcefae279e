package skstream

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Stream is the device's Signal K delta stream. Create it with New, configure subscriptions,
// PUT handlers and metadata at any time, and Start it; publishing is accepted from Start on.
type Stream struct {
	clk        clockwork.Clock
	log        *slog.Logger
	opts       Options
	label      string
	jitter     func() float64
	timestamps atomic.Bool
	// wallRead is the last reading of the device clock (stamp.go).
	wallRead atomic.Pointer[wallReading]

	ctx    context.Context
	cancel context.CancelFunc
	// wg tracks the goroutines Close waits for. cbWG tracks those that run caller code which
	// may be slow (subscriber callbacks, PUT handlers and PUT results): they are told to stop
	// by Close and end when the callback in progress returns, but Close does not wait for it.
	wg        sync.WaitGroup
	cbWG      sync.WaitGroup
	stopWatch func() bool

	// mu guards everything below: the stream's state is split into parts by what they do,
	// all under this one lock, so that an event touching several parts (a link that drops
	// fails the PUT table and moves the queues) stays one atomic step.
	//
	// Lock order: mu, then a subscriber's mu (dispatchLocked offers deltas to subscriber
	// queues) or an attempt's mu (dropLinkLocked aborts a dial). A putAgg's mu is never held
	// together with mu. No caller code runs under any of them: subscriber callbacks, PUT
	// handlers and PUT results run on their own goroutines (cbWG) with no lock held, and a
	// session's socket is closed outside the lock.
	mu      sync.Mutex
	started bool
	closed  bool
	set     Settings

	batcher       // the open batch (batch.go)
	outbound      // outbound queues: control frames, the offline ring, the writer (queue.go)
	link          // the link and dialing: target, session, backoff (link.go)
	counters      // what Status reports
	subscriptions // local subscribers and what the server was asked for (subs.go)
	putTable      // outbound PUTs in flight and inbound PUT handlers (put.go)
	metaTable     // declared metadata and its reconciliation (meta.go)

	// sk_ws notifications.
	statusCh     chan struct{}
	lastDropNote time.Time
	dropNoteDue  bool
}

// counters are the totals Status reports.
type counters struct {
	sent, dropped, reconnects uint64
	in                        InStatus
	putOK, putFailed          uint64
	putInbound, putAnswered   uint64
}

// New builds a stopped stream.
func New(opts Options) *Stream {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	label := "dev." + opts.Hostname
	s := &Stream{
		clk:    opts.Clock,
		log:    opts.Logger,
		opts:   opts,
		label:  label,
		jitter: opts.Jitter,
		set:    normalize(opts.Settings),
		batcher: batcher{self: group{paths: newPathTable(), ts: noStamp,
			overhead: deltaOverhead + len(label)}},
		link:          link{netUp: true, kick: make(chan struct{}, 1)},
		subscriptions: subscriptions{subs: make(map[uint64]*subscriber)},
		putTable: putTable{puts: make(map[string]*pendingPut), handlers: make(map[string]*PutPath),
			inQ: make(chan inboundPut, InboundPutQueue), resultCh: make(chan struct{}, 1)},
		metaTable: metaTable{metaKick: make(chan struct{}, 1)},
		statusCh:  make(chan struct{}, 1),
	}
	if s.jitter == nil {
		s.jitter = func() float64 { return rand.Float64()*2 - 1 }
	}
	s.timestamps.Store(s.set.Timestamps)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

func normalize(st Settings) Settings {
	st.BatchMS = max(st.BatchMS, 0)
	st.BufferMsgs = max(st.BufferMsgs, 0)
	st.BufferKB = max(st.BufferKB, 0)
	st.DrainPerS = max(st.DrainPerS, 1)
	st.BackoffMaxS = max(st.BackoffMaxS, 1)
	return st
}

// Start begins dialing (when a target is set) and accepting published values. Cancelling ctx
// closes the stream.
func (s *Stream) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.started {
		s.mu.Unlock()
		return fmt.Errorf("%w: already started", ErrInvalidState)
	}
	s.started = true
	s.mu.Unlock()
	s.wg.Add(2)
	go s.run()
	go s.notifier()
	s.cbWG.Add(2)
	go s.resultRunner()
	go s.inboundWorker()
	s.mu.Lock()
	s.stopWatch = context.AfterFunc(ctx, s.Close)
	s.mu.Unlock()
	s.publishCurrent("")
	return nil
}

// Close stops the stream: the socket closes, pending PUTs end as FAILED (their callbacks still
// run) and buffered data is dropped. It waits for the stream's own goroutines but not for a
// subscriber callback or PUT handler still running; those goroutines end when it returns.
// It is safe to call more than once.
func (s *Stream) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.failPutsLocked("stream closed")
	if s.batchTimer != nil {
		s.batchTimer.Stop()
	}
	if s.dialing != nil {
		s.dialing.abort()
	}
	s.broadcastLocked()
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// SetSettings applies changed sk.* keys.
func (s *Stream) SetSettings(st Settings) {
	st = normalize(st)
	s.mu.Lock()
	old := s.set
	s.set = st
	s.timestamps.Store(st.Timestamps)
	s.trimLocked()
	var end *session
	if old.WSEnabled && !st.WSEnabled {
		end = s.dropLinkLocked()
	}
	if !old.WSEnabled && st.WSEnabled {
		s.dialNowLocked()
	}
	s.wakeWriterLocked()
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate("streaming disabled"))
	}
	s.kickManager()
	s.noteStatus()
}

// Health gives what skLinkStalled needs: whether a connection reached the hello this boot, and
// since when (clock time) the stream has been down after that (zero while connected).
func (s *Stream) Health() (workedOnce bool, downSince time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.workedOnce, s.downSince
}

// Hello is the last hello consumed (zero before the first).
func (s *Stream) Hello() Hello {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hello
}

// Status is the `ws` object of /sk/status.
func (s *Stream) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

func (s *Stream) statusLocked() Status {
	st := Status{
		Connected:     s.connected,
		State:         s.stateLocked(),
		Sent:          s.sent,
		Buffered:      s.ring.len(),
		BufferedBytes: s.ring.bytes,
		Draining:      s.draining,
		Dropped:       s.dropped,
		Reconnects:    s.reconnects,
		LastError:     s.lastErr,
		Meta:          MetaStatus{Declared: len(s.metas), Reconciled: s.metaReconciled},
		In:            s.in,
		Put: PutStatus{Pending: len(s.puts), OK: s.putOK, Failed: s.putFailed,
			Inbound: s.putInbound, Answered: s.putAnswered},
	}
	st.In.Subs = len(s.subs)
	if st.State == StateBackoff {
		st.NextRetryS = int(math.Ceil(s.clk.Until(s.nextDial).Seconds()))
	}
	return st
}

func (s *Stream) stateLocked() string {
	switch {
	case !s.started || s.closed:
		return StateStopped
	case s.connected:
		return StateConnected
	case s.target == nil:
		return StateNoTarget
	case !s.set.WSEnabled:
		return StateDisabled
	case !s.netUp:
		return StateNetworkDown
	case s.unauth:
		return StateUnauthorized
	case s.certErr:
		return StateCertError
	case s.dialing != nil || s.sess != nil:
		return StateConnecting
	case s.clk.Now().Before(s.nextDial):
		return StateBackoff
	}
	return StateConnecting
}

func (s *Stream) noteStatus() {
	select {
	case s.statusCh <- struct{}{}:
	default:
	}
}

// noteDropsLocked reports drops at most once a second, so a full ring does not flood sk_ws.
func (s *Stream) noteDropsLocked() {
	now := s.clk.Now()
	if now.Sub(s.lastDropNote) >= time.Second {
		s.lastDropNote = now
		s.noteStatus()
		return
	}
	if s.dropNoteDue {
		return
	}
	s.dropNoteDue = true
	s.clk.AfterFunc(s.lastDropNote.Add(time.Second).Sub(now), func() {
		s.mu.Lock()
		s.dropNoteDue = false
		s.lastDropNote = s.clk.Now()
		s.mu.Unlock()
		s.noteStatus()
	})
}

func (s *Stream) notifier() {
	defer s.wg.Done()
	each(s.ctx, s.statusCh, func(struct{}) {
		if s.opts.OnStatus != nil {
			s.opts.OnStatus(s.Status())
		}
	})
}

// each calls fn with every item of ch, one at a time, until ctx ends: the loop of the
// stream's single-purpose goroutines.
func each[T any](ctx context.Context, ch <-chan T, fn func(T)) {
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-ch:
			fn(v)
		}
	}
}
