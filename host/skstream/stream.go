package skstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
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

	ctx    context.Context
	cancel context.CancelFunc
	// wg tracks the goroutines Close waits for. cbWG tracks those that run caller code which
	// may be slow (subscriber callbacks, PUT handlers and PUT results): they are told to stop
	// by Close and end when the callback in progress returns, but Close does not wait for it.
	wg        sync.WaitGroup
	cbWG      sync.WaitGroup
	stopWatch func() bool

	mu      sync.Mutex
	started bool
	closed  bool
	set     Settings

	// The open batch.
	batch         []entry
	batchIdx      map[string]int
	batchBytes    int
	batchTS       time.Time
	batchTimer    clockwork.Timer
	batchDeadline time.Time

	// Outbound queues: control frames (subscriptions, PUTs and their answers) only exist for the
	// live connection; the ring holds raw frames and deltas across outages.
	ring      ring
	spare     [][]byte // written delta buffers for the next batches (bufferLocked)
	ctrl      [][]byte
	writing   bool
	draining  bool
	nextDrain time.Time
	changed   chan struct{} // closed and replaced whenever the queues or the link move

	// The link.
	target     *Target
	targetGen  uint64
	netUp      bool
	unauth     bool
	certErr    bool
	sess       *session
	dialing    *attempt
	connected  bool
	round      int
	nextDial   time.Time
	workedOnce bool
	downSince  time.Time
	lastErr    string
	hello      Hello
	kick       chan struct{}

	// Counters.
	sent, dropped, reconnects uint64
	in                        InStatus
	putOK, putFailed          uint64
	putInbound, putAnswered   uint64

	// Subscriptions.
	subs      map[uint64]*subscriber
	subSeq    uint64
	sentCover []string

	// PUTs.
	puts     map[string]*pendingPut
	handlers map[string]*PutPath
	inQ      chan inboundPut
	results  []func()
	resultCh chan struct{}

	// Metadata.
	metas          []*metaDecl
	metaReconciled int
	metaKick       chan struct{}

	// sk_ws notifications.
	statusCh     chan struct{}
	lastDropNote time.Time
	dropNoteDue  bool
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
	s := &Stream{
		clk:      opts.Clock,
		log:      opts.Logger,
		opts:     opts,
		label:    "dev." + opts.Hostname,
		jitter:   opts.Jitter,
		set:      normalize(opts.Settings),
		batchIdx: make(map[string]int),
		changed:  make(chan struct{}),
		netUp:    true,
		kick:     make(chan struct{}, 1),
		subs:     make(map[uint64]*subscriber),
		puts:     make(map[string]*pendingPut),
		handlers: make(map[string]*PutPath),
		inQ:      make(chan inboundPut, InboundPutQueue),
		resultCh: make(chan struct{}, 1),
		metaKick: make(chan struct{}, 1),
		statusCh: make(chan struct{}, 1),
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
		s.round, s.nextDial = 0, time.Time{}
	}
	s.wakeWriterLocked()
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate("streaming disabled"))
	}
	s.kickManager()
	s.noteStatus()
}

// SetTarget points the stream at a server, or at none with nil (the socket closes, buffering
// goes on). It always closes the current socket and dials the new target at once; it also
// lifts the stop after a 401, 403 or certificate error.
func (s *Stream) SetTarget(t *Target) {
	if t != nil {
		c := *t
		t = &c
	}
	s.mu.Lock()
	s.target = t
	s.targetGen++
	s.unauth, s.certErr = false, false
	s.round, s.nextDial = 0, time.Time{}
	end := s.dropLinkLocked()
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate("target changed"))
	}
	s.kickManager()
	s.noteStatus()
}

// Retry lifts a stop after a 401, 403 or certificate error and ends any backoff wait: the
// current target is dialed at once. A live connection is left alone.
func (s *Stream) Retry() {
	s.mu.Lock()
	s.unauth, s.certErr = false, false
	s.round, s.nextDial = 0, time.Time{}
	s.mu.Unlock()
	s.kickManager()
	s.noteStatus()
}

// Connected reports whether the stream has consumed the hello of a live connection.
func (s *Stream) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// NetworkUp is the device's network-up notification: dial at once.
func (s *Stream) NetworkUp() {
	s.mu.Lock()
	s.netUp = true
	s.round, s.nextDial = 0, time.Time{}
	s.mu.Unlock()
	s.kickManager()
	s.noteStatus()
}

// NetworkDown is the network-down notification: close the socket, stop dialing, keep buffering.
func (s *Stream) NetworkDown() {
	s.mu.Lock()
	s.netUp = false
	end := s.dropLinkLocked()
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate("network down"))
	}
	s.kickManager()
	s.noteStatus()
}

// NetworkChanged is the CHANGED edge (route moved or address changed): the socket is bound to
// the old route, so close it and dial again at once.
func (s *Stream) NetworkChanged() {
	s.mu.Lock()
	s.netUp = true
	s.round, s.nextDial = 0, time.Time{}
	end := s.dropLinkLocked()
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate("network changed"))
	}
	s.kickManager()
	s.noteStatus()
}

// dropLinkLocked aborts a dial in progress and returns the session to end (outside the lock).
func (s *Stream) dropLinkLocked() *session {
	if s.dialing != nil {
		s.dialing.abort()
	}
	return s.sess
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

// Publishing.

// PublishNumber publishes a number for vessels.self; NaN and infinities are sent as null.
func (s *Stream) PublishNumber(path string, v float64) error {
	return s.publish(entry{path: path, kind: kindNumber, num: v})
}

// PublishString publishes a string.
func (s *Stream) PublishString(path, v string) error {
	return s.publish(entry{path: path, kind: kindString, str: v})
}

// PublishBool publishes a boolean.
func (s *Stream) PublishBool(path string, v bool) error {
	return s.publish(entry{path: path, kind: kindBool, b: v})
}

// PublishJSON publishes a JSON value (object, array or scalar); it is copied.
func (s *Stream) PublishJSON(path string, v []byte) error {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || !json.Valid(v) {
		return fmt.Errorf("%w: value for %q is not JSON", ErrInvalidArgument, path)
	}
	return s.publish(entry{path: path, kind: kindJSON, raw: bytes.Clone(v)})
}

// Publish publishes any Go value: numbers, strings and booleans directly, nil as null,
// json.RawMessage as is, anything else through encoding/json.
func (s *Stream) Publish(path string, v any) error {
	e, err := toEntry(path, v)
	if err != nil {
		return err
	}
	return s.publish(e)
}

// Item is one value for PublishValues. Value takes what Publish takes.
type Item struct {
	Path  string
	Value any
}

// PublishValues publishes several values into the same batch: all of them or, when one is
// refused, none.
func (s *Stream) PublishValues(items ...Item) error {
	es := make([]entry, len(items))
	for i, it := range items {
		e, err := toEntry(it.Path, it.Value)
		if err != nil {
			return err
		}
		if err := s.checkEntry(&e); err != nil {
			return err
		}
		es[i] = e
	}
	ts := s.stamp()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return ErrInvalidState
	}
	if total := batchSize(es); total+deltaOverhead+len(s.label) > MaxMessageBytes-s.batchBytes {
		s.closeBatchLocked()
	}
	for i := range es {
		s.addLocked(es[i], ts)
	}
	s.armLocked()
	return nil
}

func batchSize(es []entry) int {
	n := 0
	for i := range es {
		n += es[i].size()
	}
	return n
}

func toEntry(path string, v any) (entry, error) {
	switch x := v.(type) {
	case float64:
		return entry{path: path, kind: kindNumber, num: x}, nil
	case float32:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case int:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case int64:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case uint64:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case string:
		return entry{path: path, kind: kindString, str: x}, nil
	case bool:
		return entry{path: path, kind: kindBool, b: x}, nil
	case nil:
		return entry{path: path, kind: kindJSON, raw: []byte("null")}, nil
	case json.RawMessage:
		raw := bytes.TrimSpace(x)
		if len(raw) == 0 || !json.Valid(raw) {
			return entry{}, fmt.Errorf("%w: value for %q is not JSON", ErrInvalidArgument, path)
		}
		return entry{path: path, kind: kindJSON, raw: bytes.Clone(raw)}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return entry{}, fmt.Errorf("%w: value for %q: %v", ErrInvalidArgument, path, err)
	}
	return entry{path: path, kind: kindJSON, raw: b}, nil
}

func (s *Stream) checkEntry(e *entry) error {
	if err := checkPath(e.path); err != nil {
		return err
	}
	if e.size()+deltaOverhead+len(s.label) > MaxMessageBytes {
		return fmt.Errorf("%w: value for %q is larger than a message", ErrInvalidArgument, e.path)
	}
	return nil
}

// stamp is the measurement time for values published now, or zero without timestamps.
func (s *Stream) stamp() time.Time {
	if s.timestamps.Load() && s.opts.WallClock != nil {
		if t, ok := s.opts.WallClock(); ok {
			return t
		}
	}
	return time.Time{}
}

func (s *Stream) publish(e entry) error {
	if err := s.checkEntry(&e); err != nil {
		return err
	}
	ts := s.stamp()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return ErrInvalidState
	}
	s.addLocked(e, ts)
	s.armLocked()
	return nil
}

// addLocked puts a checked value into the open batch (last value wins per path).
func (s *Stream) addLocked(e entry, ts time.Time) {
	size := e.size()
	if i, ok := s.batchIdx[e.path]; ok {
		s.batchBytes += size - s.batch[i].size()
		s.batch[i] = e
	} else {
		if len(s.batch) > 0 && s.batchBytes+size+deltaOverhead+len(s.label) > MaxMessageBytes {
			s.closeBatchLocked()
		}
		s.batchIdx[e.path] = len(s.batch)
		s.batch = append(s.batch, e)
		s.batchBytes += size
	}
	if ts.After(s.batchTS) {
		s.batchTS = ts
	}
}

// armLocked closes the batch at once with sk.batch_ms 0, else opens its window.
func (s *Stream) armLocked() {
	switch {
	case s.set.BatchMS == 0:
		s.closeBatchLocked()
	case len(s.batch) > 0 && s.batchDeadline.IsZero():
		d := time.Duration(s.set.BatchMS) * time.Millisecond
		s.batchDeadline = s.clk.Now().Add(d)
		if s.batchTimer == nil {
			s.batchTimer = s.clk.AfterFunc(d, s.batchExpired)
		} else {
			s.batchTimer.Reset(d)
		}
	}
}

func (s *Stream) batchExpired() {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A timer that fired for a batch closed early must not cut the next window short.
	if s.batchDeadline.IsZero() || s.clk.Now().Before(s.batchDeadline) {
		return
	}
	s.closeBatchLocked()
}

// closeBatchLocked turns the open batch into one delta message at the end of the ring.
func (s *Stream) closeBatchLocked() {
	s.batchDeadline = time.Time{}
	if s.batchTimer != nil {
		s.batchTimer.Stop()
	}
	if len(s.batch) == 0 {
		return
	}
	b := appendDelta(s.bufferLocked(s.batchBytes+deltaOverhead+len(s.label)), s.label, s.batchTS, s.batch)
	clear(s.batch)
	s.batch = s.batch[:0]
	clear(s.batchIdx)
	s.batchBytes, s.batchTS = 0, time.Time{}
	s.ring.add(false, b)
	s.trimLocked()
	s.wakeWriterLocked()
}

// maxSpare is how many written delta buffers are kept for the next batches. At full speed a
// message is closed for every one written, so a few spares make the steady state allocate
// nothing; more would only hold memory.
const maxSpare = 4

// bufferLocked returns an empty buffer of at least n bytes' capacity, a spare one if it fits.
func (s *Stream) bufferLocked(n int) []byte {
	for i := len(s.spare) - 1; i >= 0; i-- {
		if b := s.spare[i]; cap(b) >= n {
			s.spare[i] = s.spare[len(s.spare)-1]
			s.spare[len(s.spare)-1] = nil
			s.spare = s.spare[:len(s.spare)-1]
			return b[:0]
		}
	}
	return make([]byte, 0, n)
}

// recycleLocked keeps a delta buffer the socket is done with (written or dropped) for a later
// batch.
func (s *Stream) recycleLocked(b []byte) {
	if len(s.spare) < maxSpare && cap(b) <= 2*MaxMessageBytes {
		s.spare = append(s.spare, b)
	}
}

// SendRaw queues a complete frame (a JSON document); raw frames go out ahead of buffered deltas.
func (s *Stream) SendRaw(frame []byte) error {
	frame = bytes.TrimSpace(frame)
	if len(frame) == 0 || len(frame) > MaxMessageBytes || !json.Valid(frame) {
		return fmt.Errorf("%w: raw frame is not a JSON document of at most %d bytes", ErrInvalidArgument, MaxMessageBytes)
	}
	b := bytes.Clone(frame)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return ErrInvalidState
	}
	s.ring.add(true, b)
	s.trimLocked()
	s.wakeWriterLocked()
	return nil
}

// Flush closes the open batch and waits until nothing is left to send: nil when everything is
// written, ErrTimeout when timeout (clock time) passes first, ErrInvalidState when the stream
// is not connected or goes down while waiting, ctx.Err() when ctx ends.
func (s *Stream) Flush(ctx context.Context, timeout time.Duration) error {
	s.mu.Lock()
	if !s.started || s.closed || !s.connected {
		s.mu.Unlock()
		return ErrInvalidState
	}
	s.closeBatchLocked()
	s.mu.Unlock()
	t := s.clk.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		if !s.connected || s.closed {
			s.mu.Unlock()
			return ErrInvalidState
		}
		if s.ring.len() == 0 && len(s.ctrl) == 0 && !s.writing {
			s.mu.Unlock()
			return nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-t.Chan():
			return ErrTimeout
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// trimLocked keeps the ring inside sk.buffer_msgs and sk.buffer_kb, dropping the oldest. While
// connected the newest message is always kept so a zero-sized ring still lets live data out.
func (s *Stream) trimLocked() {
	keep := 0
	if s.connected {
		keep = 1
	}
	n := s.ring.trim(s.set.BufferMsgs, s.set.BufferKB*1024, keep, s.recycleLocked)
	if n == 0 {
		return
	}
	s.dropped += uint64(n)
	if s.ring.delta.len() == 0 {
		s.draining = false
	}
	s.noteDropsLocked()
}

func (s *Stream) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Stream) wakeWriterLocked() {
	s.broadcastLocked()
	if s.sess != nil {
		select {
		case s.sess.wake <- struct{}{}:
		default:
		}
	}
}

func (s *Stream) kickManager() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sendCtrlLocked queues a control frame for the live connection; without one it is dropped.
func (s *Stream) sendCtrlLocked(frame []byte) bool {
	if !s.connected {
		return false
	}
	s.ctrl = append(s.ctrl, frame)
	s.wakeWriterLocked()
	return true
}

// Status notifications.

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
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.statusCh:
			if s.opts.OnStatus != nil {
				s.opts.OnStatus(s.Status())
			}
		}
	}
}

// The link manager.

type closeReason struct{ msg string }

func (c closeReason) Error() string { return c.msg }

func deliberate(msg string) error { return closeReason{msg} }

func isDeliberate(err error) bool {
	var c closeReason
	return errors.As(err, &c)
}

// backoff is the WiFi curve: 1 s × 2^round capped at max, ±25 % jitter (j in [-1, 1]).
func backoff(round int, maxDelay time.Duration, j float64) time.Duration {
	d := maxDelay
	if round < 31 {
		if b := time.Second << round; b < d {
			d = b
		}
	}
	j = math.Max(-1, math.Min(1, j))
	return d + time.Duration(float64(d)*0.25*j)
}

func (s *Stream) failLocked(err error) {
	s.lastErr = err.Error()
	d := backoff(s.round, time.Duration(s.set.BackoffMaxS)*time.Second, s.jitter())
	s.round++
	s.nextDial = s.clk.Now().Add(d)
	s.log.Warn("signal k stream: attempt failed", "err", err, "retry_in", d.String())
}

func (s *Stream) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		state := s.stateLocked()
		wait := s.clk.Until(s.nextDial)
		s.mu.Unlock()
		switch state {
		case StateConnecting:
			s.connect()
			continue
		case StateBackoff:
			t := s.clk.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-s.kick:
			case <-t.Chan():
			}
			t.Stop()
		default:
			select {
			case <-s.ctx.Done():
				return
			case <-s.kick:
			}
		}
	}
}

// attempt is one dial in progress; abort closes its socket so the handshake ends at once.
type attempt struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	conn    net.Conn
	aborted bool
}

func (a *attempt) abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aborted = true
	a.cancel()
	if a.conn != nil {
		a.conn.Close()
	}
}

func (a *attempt) track(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		c.Close()
		return nil, errors.New("dial aborted")
	}
	a.conn = c
	return c, nil
}

func (a *attempt) connection() net.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

func (a *attempt) wasAborted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.aborted
}

// streamURL turns the target's server URL into the stream address.
func streamURL(target string, sendMeta bool) (u string, tls bool, err error) {
	p, err := url.Parse(target)
	if err != nil {
		return "", false, fmt.Errorf("target URL: %w", err)
	}
	port := "80"
	switch p.Scheme {
	case "ws", "http":
		p.Scheme = "ws"
	case "wss", "https":
		p.Scheme, port, tls = "wss", "443", true
	default:
		return "", false, fmt.Errorf("target URL %q: scheme must be ws or wss", target)
	}
	if p.Hostname() == "" {
		return "", false, fmt.Errorf("target URL %q has no host", target)
	}
	if p.Port() != "" {
		port = p.Port()
	}
	out := url.URL{Scheme: p.Scheme, Host: net.JoinHostPort(p.Hostname(), port),
		Path: "/signalk/v1/stream", RawQuery: "subscribe=none"}
	if sendMeta {
		out.RawQuery += "&sendMeta=all"
	}
	return out.String(), tls, nil
}

// connect dials once, waits for the hello, then serves the connection until it ends.
func (s *Stream) connect() {
	dctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	a := &attempt{cancel: cancel}
	s.mu.Lock()
	if s.target == nil {
		s.mu.Unlock()
		return
	}
	t, gen := *s.target, s.targetGen
	withMeta := len(s.subs) > 0
	u, isTLS, err := streamURL(t.URL, withMeta)
	if err != nil {
		s.failLocked(err)
		s.mu.Unlock()
		s.noteStatus()
		return
	}
	s.dialing = a
	s.mu.Unlock()
	s.noteStatus()

	d := &websocket.Dialer{
		HandshakeTimeout: s.opts.HandshakeTimeout,
		TLSClientConfig:  t.TLSConfig,
		ReadBufferSize:   4096,
		WriteBufferSize:  4096,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			return a.track(nd.DialContext(ctx, network, addr))
		},
	}
	if t.DialTLS != nil {
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return a.track(t.DialTLS(ctx, network, addr))
		}
	}
	hdr := http.Header{}
	if t.Token != "" {
		hdr.Set("Authorization", "Bearer "+t.Token)
	}
	ws, resp, err := d.DialContext(dctx, u, hdr)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if resp != nil && t.Proven != nil {
		if c := a.connection(); c != nil {
			t.Proven(c)
		}
	}

	s.mu.Lock()
	s.dialing = nil
	if err == nil && (a.wasAborted() || gen != s.targetGen || s.closed) {
		err = deliberate("dial superseded")
		ws.Close()
	}
	if err != nil {
		var unauth *Unauthorized
		var certErr error
		switch {
		case a.wasAborted() || isDeliberate(err) || s.closed:
			// A deliberate stop already set what happens next.
		case resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
			s.unauth = true
			s.lastErr = fmt.Sprintf("upgrade refused: %d", resp.StatusCode)
			unauth = &Unauthorized{StatusCode: resp.StatusCode, TLS: isTLS, URL: t.URL}
			s.log.Warn("signal k stream: unauthorized", "status", resp.StatusCode)
		case s.opts.IsCertError != nil && s.opts.IsCertError(err):
			s.certErr = true
			s.lastErr = err.Error()
			certErr = err
			s.log.Warn("signal k stream: certificate refused", "err", err)
		case resp != nil:
			s.failLocked(fmt.Errorf("upgrade answered %d: %w", resp.StatusCode, err))
		default:
			s.failLocked(fmt.Errorf("dial: %w", err))
		}
		s.mu.Unlock()
		if unauth != nil && s.opts.OnUnauthorized != nil {
			s.opts.OnUnauthorized(*unauth)
		}
		if certErr != nil && s.opts.OnCertError != nil {
			s.opts.OnCertError(certErr)
		}
		s.noteStatus()
		return
	}
	// No read limit: the read loop streams every frame and keeps at most MaxFrameBytes+1 of
	// it, so a frame of any size costs no more memory than that and is dropped without ending
	// the connection.
	sess := newSession(s.ctx, ws)
	s.sess = sess
	s.mu.Unlock()
	s.serve(sess)
}

type session struct {
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	ended  chan struct{}
	reason error
	wake   chan struct{}
	helloC chan Hello
	wg     sync.WaitGroup
}

func newSession(parent context.Context, ws *websocket.Conn) *session {
	ctx, cancel := context.WithCancel(parent)
	return &session{ws: ws, ctx: ctx, cancel: cancel, ended: make(chan struct{}),
		wake: make(chan struct{}, 1), helloC: make(chan Hello, 1)}
}

func (ss *session) end(reason error) {
	ss.once.Do(func() {
		ss.reason = reason
		close(ss.ended)
	})
}

func (s *Stream) serve(sess *session) {
	sess.wg.Add(1)
	go s.readLoop(sess)

	helloT := s.clk.NewTimer(s.opts.HelloTimeout)
	select {
	case h := <-sess.helloC:
		helloT.Stop()
		s.onHello(sess, h)
	case <-helloT.Chan():
		sess.end(fmt.Errorf("no hello within %s", s.opts.HelloTimeout))
	case <-sess.ended:
		helloT.Stop()
	case <-s.ctx.Done():
		helloT.Stop()
		sess.end(deliberate("stream closed"))
	}
	select {
	case <-sess.ended:
	case <-s.ctx.Done():
		sess.end(deliberate("stream closed"))
	}
	if isDeliberate(sess.reason) {
		_ = sess.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	}
	sess.ws.Close()
	sess.cancel()
	sess.wg.Wait()
	s.onSessionEnd(sess)
}

func (s *Stream) onHello(sess *session, h Hello) {
	s.mu.Lock()
	if s.sess != sess || s.closed {
		s.mu.Unlock()
		return
	}
	s.connected = true
	if s.workedOnce {
		s.reconnects++
	}
	s.workedOnce = true
	s.downSince = time.Time{}
	s.round = 0
	s.lastErr = ""
	s.hello = h
	s.draining = s.ring.delta.len() > 0
	s.nextDrain = s.clk.Now()
	s.sentCover = nil
	s.syncSubsLocked()
	for _, m := range s.metas {
		m.reconciled = false
	}
	s.metaReconciled = 0
	s.broadcastLocked()
	sess.wg.Add(1)
	go s.writeLoop(sess)
	if s.opts.HTTP != nil {
		sess.wg.Add(1)
		go s.metaLoop(sess)
	}
	s.mu.Unlock()
	s.log.Info("signal k stream: connected", "server", h.Name, "version", h.Version, "self", h.Self)
	if s.opts.OnHello != nil {
		s.opts.OnHello(h)
	}
	s.noteStatus()
	s.publishCurrent("")
}

func (s *Stream) onSessionEnd(sess *session) {
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	wasConnected := s.connected
	s.sess = nil
	s.connected = false
	s.ctrl = nil
	s.writing = false
	s.draining = false
	s.sentCover = nil
	s.failPutsLocked("stream closed")
	if wasConnected {
		s.downSince = s.clk.Now()
	}
	if !isDeliberate(sess.reason) && !s.closed {
		s.failLocked(sess.reason)
	}
	s.trimLocked()
	s.broadcastLocked()
	s.mu.Unlock()
	if wasConnected {
		s.log.Info("signal k stream: disconnected", "reason", sess.reason)
	}
	s.noteStatus()
}

func (s *Stream) readLoop(sess *session) {
	defer sess.wg.Done()
	// One buffer for the connection's life: the parsed frame never outlives the next read.
	buf := make([]byte, MaxFrameBytes+1)
	first := true
	for {
		typ, r, err := sess.ws.NextReader()
		if err != nil {
			sess.end(fmt.Errorf("read: %w", err))
			return
		}
		data, size, err := readFrame(r, buf)
		if err != nil {
			sess.end(fmt.Errorf("read: %w", err))
			return
		}
		over := size > MaxFrameBytes
		if first {
			first = false
			var f Frame
			if typ == websocket.TextMessage && !over {
				f, err = ParseFrame(data)
			}
			if typ != websocket.TextMessage || over || err != nil || f.Kind != FrameHello {
				sess.end(fmt.Errorf("malformed hello (%d bytes)", size))
				return
			}
			sess.helloC <- f.Hello
			continue
		}
		s.handleFrame(sess, typ, data, size)
	}
}

// readFrame reads one frame into buf (MaxFrameBytes+1 long) and returns what it holds and the
// frame's full size. The part of a larger frame that does not fit is read and thrown away, so
// an oversized frame occupies no more memory than buf however long it is.
func readFrame(r io.Reader, buf []byte) (data []byte, size int64, err error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return buf[:n], int64(n), nil
	case err != nil:
		return nil, int64(n), fmt.Errorf("frame body: %w", err)
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, int64(n) + rest, fmt.Errorf("oversized frame body: %w", err)
	}
	return buf[:n], int64(n) + rest, nil
}

func (s *Stream) handleFrame(sess *session, typ int, data []byte, size int64) {
	s.mu.Lock()
	s.in.Frames++
	switch {
	case size > MaxFrameBytes:
		s.in.Oversize++
		s.mu.Unlock()
		s.log.Warn("signal k stream: inbound frame over 16 KiB dropped", "bytes", size)
		return
	case typ != websocket.TextMessage:
		s.in.Bad++
		s.mu.Unlock()
		s.log.Warn("signal k stream: binary frame dropped")
		return
	}
	s.mu.Unlock()
	if len(data) > 0 && data[0] == '"' && json.Valid(data) {
		// signalk-server answers a request it dislikes with a bare JSON string.
		s.log.Warn("signal k stream: server notice", "text", string(data[:min(len(data), 200)]))
		return
	}
	f, err := ParseFrame(data)
	if err != nil {
		s.mu.Lock()
		s.in.Bad++
		s.mu.Unlock()
		s.log.Warn("signal k stream: bad frame dropped", "err", err, "head", string(data[:min(len(data), 64)]))
		return
	}
	switch f.Kind {
	case FrameDelta:
		s.dispatch(f)
	case FramePutAnswer:
		s.onPutAnswer(f)
	case FramePutRequest:
		s.onPutRequest(f)
	}
}

// writeLoop sends control frames, then raw frames, then deltas (paced while draining a backlog).
func (s *Stream) writeLoop(sess *session) {
	defer sess.wg.Done()
	const (
		kCtrl = iota
		kRaw
		kDelta
	)
	for {
		s.mu.Lock()
		if s.sess != sess || !s.connected {
			s.mu.Unlock()
			return
		}
		var (
			frame []byte
			m     message
			kind  int
			wait  time.Duration
		)
		now := s.clk.Now()
		switch {
		case len(s.ctrl) > 0:
			frame, kind = s.ctrl[0], kCtrl
			s.ctrl[0] = nil
			s.ctrl = s.ctrl[1:]
		case s.ring.raw.len() > 0:
			m, kind = s.ring.take(true), kRaw
			frame = m.b
		case s.ring.delta.len() > 0:
			if s.draining && now.Before(s.nextDrain) {
				wait = s.nextDrain.Sub(now)
				break
			}
			m, kind = s.ring.take(false), kDelta
			frame = m.b
		}
		if frame == nil {
			s.mu.Unlock()
			var tc <-chan time.Time
			var t clockwork.Timer
			if wait > 0 {
				t = s.clk.NewTimer(wait)
				tc = t.Chan()
			}
			var ended bool
			select {
			case <-sess.wake:
			case <-tc:
			case <-sess.ended:
				ended = true
			}
			if t != nil {
				t.Stop()
			}
			if ended {
				return
			}
			continue
		}
		s.writing = true
		s.mu.Unlock()

		_ = sess.ws.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		err := sess.ws.WriteMessage(websocket.TextMessage, frame)

		s.mu.Lock()
		s.writing = false
		if err != nil {
			if kind != kCtrl {
				s.ring.putBack(kind == kRaw, m)
			}
			s.broadcastLocked()
			s.mu.Unlock()
			sess.end(fmt.Errorf("write: %w", err))
			return
		}
		if kind != kCtrl {
			s.sent++
		}
		if kind == kDelta {
			// WriteMessage has copied the frame into the connection's own buffer.
			s.recycleLocked(frame)
		}
		if kind == kDelta && s.draining {
			s.nextDrain = s.clk.Now().Add(time.Second / time.Duration(s.set.DrainPerS))
			if s.ring.delta.len() == 0 {
				s.draining = false
			}
		}
		s.broadcastLocked()
		s.mu.Unlock()
	}
}
