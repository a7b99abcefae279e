package skstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// outbound holds what waits to be written. Control frames (subscriptions, PUTs and their
// answers) only exist for the live connection; the ring is the offline queue, holding raw
// frames and delta messages across outages, drained at a bounded rate after a reconnect.
// Guarded by Stream.mu.
type outbound struct {
	ring      ring
	spare     [][]byte // written delta buffers for the next batches (bufferLocked)
	ctrl      [][]byte
	writing   bool
	draining  bool
	nextDrain time.Time
	changed   chan struct{} // closed whenever the queues or the link move (changedLocked)
	// bufWaiters are the WaitBuffered calls in progress, each woken once, when the ring holds
	// at most its bytes or the stream closes, rather than at every change of the queues.
	bufWaiters []bufWaiter
}

// bufWaiter is one WaitBuffered call: ch is closed once the ring holds at most max bytes.
type bufWaiter struct {
	max int
	ch  chan struct{}
}

// maxSpare is how many written delta buffers are always kept for the next batches. At full
// speed a message is closed for every one written, so a few spares make the steady state
// allocate nothing; more are kept only within the ring's byte budget (recycleLocked).
const maxSpare = 4

// bufferLocked returns an empty buffer of at least n bytes' capacity: the smallest spare one
// that fits, else a new one rounded up to whole KiB so that batches of nearly the same size
// can reuse each other's buffers.
func (s *Stream) bufferLocked(n int) []byte {
	best := -1
	for i, b := range s.spare {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.spare[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]byte, 0, (n+1023)&^1023)
	}
	b := s.spare[best]
	last := len(s.spare) - 1
	s.spare[best] = s.spare[last]
	s.spare[last] = nil
	s.spare = s.spare[:last]
	return b[:0]
}

// recycleLocked keeps a delta buffer the socket is done with (written or dropped) for a later
// batch. Beyond maxSpare buffers it keeps one only while the spares and the ring together
// stay within sk.buffer_kb: publishers that fill the ring in bursts and a writer that empties
// it in between then reuse the same buffers instead of allocating a ring's worth each time,
// and the memory held never exceeds what the ring may hold anyway. With no room left it
// replaces the smallest spare when b is larger: a batch that the timer closed small must not
// leave only small spares behind, or every full batch after it would allocate anew.
func (s *Stream) recycleLocked(b []byte) {
	if cap(b) > 2*MaxMessageBytes {
		return
	}
	if len(s.spare) < maxSpare {
		s.spare = append(s.spare, b)
		return
	}
	held := s.ring.bytes + cap(b)
	for _, sp := range s.spare {
		held += cap(sp)
	}
	if held <= s.set.BufferKB*1024 {
		s.spare = append(s.spare, b)
		return
	}
	small := 0
	for i := range s.spare {
		if cap(s.spare[i]) < cap(s.spare[small]) {
			small = i
		}
	}
	if cap(s.spare[small]) < cap(b) {
		s.spare[small] = b
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
		ch := s.changedLocked()
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

// WaitBuffered blocks until the ring holds at most maxBytes bytes of messages: a publisher
// that would rather wait than have the ring drop its oldest messages (a bulk replay, a
// benchmark) calls it between runs of values. It returns nil at once when that already
// holds, and otherwise once it has held since the call (more may have been queued by the
// time the caller runs); ErrInvalidState when the stream is not started or is closed (also
// while waiting), ctx.Err() when ctx ends first. While disconnected the ring does not drain,
// so the wait lasts until a connection drains it, the stream closes or ctx ends. The caller
// is woken once, not at every message written.
func (s *Stream) WaitBuffered(ctx context.Context, maxBytes int) error {
	s.mu.Lock()
	if !s.started || s.closed {
		s.mu.Unlock()
		return ErrInvalidState
	}
	if s.ring.bytes <= maxBytes {
		s.mu.Unlock()
		return nil
	}
	w := bufWaiter{max: maxBytes, ch: make(chan struct{})}
	s.bufWaiters = append(s.bufWaiters, w)
	s.mu.Unlock()
	select {
	case <-w.ch:
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return ErrInvalidState
		}
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		s.bufWaiters = slices.DeleteFunc(s.bufWaiters, func(o bufWaiter) bool { return o.ch == w.ch })
		return ctx.Err()
	}
}

// wakeBufWaitersLocked ends the WaitBuffered calls that the ring now satisfies, or all of them
// once the stream is closed. broadcastLocked calls it, since every change of the ring (a
// message written, queued or dropped) and Close broadcast.
func (s *Stream) wakeBufWaitersLocked() {
	if len(s.bufWaiters) == 0 {
		return
	}
	kept := s.bufWaiters[:0]
	for _, w := range s.bufWaiters {
		if s.closed || s.ring.bytes <= w.max {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	clear(s.bufWaiters[len(kept):])
	s.bufWaiters = kept
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

// broadcastLocked wakes whoever waits on changed. The channel is made when someone asks for
// it (changedLocked), not anew at every broadcast: broadcasts come with every message queued
// and written, while waiters (Flush) are rare.
func (s *Stream) broadcastLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.wakeBufWaitersLocked()
}

// changedLocked is a channel closed at the next broadcast.
func (s *Stream) changedLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
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
