package skstream

import (
	"fmt"
	"slices"
	"sync"

	"devhost/host/sk"
)

// subscriptions are the local subscribers and the patterns last sent to the server.
// Guarded by Stream.mu.
type subscriptions struct {
	subs      map[uint64]*subscriber
	subSeq    uint64
	sentCover []string
}

// subscriber owns a bounded queue and the goroutine that calls its callback, so a slow callback
// delays only itself: when its queue is full the oldest waiting value is dropped (in.dropped).
type subscriber struct {
	id      uint64
	pattern string
	fn      func(sk.Delta)

	mu   sync.Mutex
	q    []sk.Delta
	head int
	n    int
	wake chan struct{}
	stop chan struct{}
}

// offer queues v and reports whether an older value had to be dropped for it.
func (sb *subscriber) offer(v sk.Delta) (dropped bool) {
	sb.mu.Lock()
	if sb.n == len(sb.q) {
		sb.q[sb.head] = sk.Delta{}
		sb.head = (sb.head + 1) % len(sb.q)
		sb.n--
		dropped = true
	}
	sb.q[(sb.head+sb.n)%len(sb.q)] = v
	sb.n++
	sb.mu.Unlock()
	select {
	case sb.wake <- struct{}{}:
	default:
	}
	return dropped
}

func (sb *subscriber) next() (sk.Delta, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.n == 0 {
		return sk.Delta{}, false
	}
	v := sb.q[sb.head]
	sb.q[sb.head] = sk.Delta{}
	sb.head = (sb.head + 1) % len(sb.q)
	sb.n--
	return v, true
}

func (s *Stream) deliver(sb *subscriber) {
	defer s.cbWG.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-sb.stop:
			return
		case <-sb.wake:
		}
		for {
			v, ok := sb.next()
			if !ok {
				break
			}
			s.call(sb, v)
			select {
			case <-sb.stop:
				return
			default:
			}
		}
	}
}

// call runs a callback; a panic in it is logged, never fatal to the device.
func (s *Stream) call(sb *subscriber, v sk.Delta) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("signal k stream: subscriber panicked", "pattern", sb.pattern, "panic", fmt.Sprint(r))
		}
	}()
	sb.fn(v)
}

// Subscribe registers fn for inbound values whose path matches pattern: an exact path, a
// family (`prefix.*`, `prefix*`) or `*`. At most MaxSubscriptions are active. The server is
// subscribed incrementally while connected and again after each reconnect. fn runs on the
// subscription's own goroutine, in order. cancel is idempotent.
func (s *Stream) Subscribe(pattern string, fn func(sk.Delta)) (cancel func(), err error) {
	if err := checkPattern(pattern); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: nil callback", ErrInvalidArgument)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if len(s.subs) >= MaxSubscriptions {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d subscriptions", ErrLimit, MaxSubscriptions)
	}
	s.subSeq++
	sb := &subscriber{id: s.subSeq, pattern: pattern, fn: fn, q: make([]sk.Delta, SubscriberQueue),
		wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.subs[sb.id] = sb
	s.syncSubsLocked()
	s.cbWG.Add(1)
	go s.deliver(sb)
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { s.unsubscribe(sb) }) }, nil
}

func (s *Stream) unsubscribe(sb *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[sb.id]; !ok {
		return
	}
	delete(s.subs, sb.id)
	close(sb.stop)
	s.syncSubsLocked()
}

func (s *Stream) patternsLocked() []string {
	ps := make([]string, 0, len(s.subs))
	for _, sb := range s.subs {
		ps = append(ps, sb.pattern)
	}
	return ps
}

// syncSubsLocked brings the server's subscriptions to the cover set of the active patterns.
// New patterns go out as an incremental subscribe. When a pattern the server holds is no longer
// needed (removed, or now covered by a broader one), the server is told to unsubscribe and the
// remaining set is subscribed again: signalk-server only accepts the unsubscribe-everything form.
func (s *Stream) syncSubsLocked() {
	if !s.connected {
		return
	}
	want := coverSet(s.patternsLocked())
	var added, removed bool
	var add []string
	for _, p := range want {
		if !slices.Contains(s.sentCover, p) {
			added = true
			add = append(add, p)
		}
	}
	for _, p := range s.sentCover {
		if !slices.Contains(want, p) {
			removed = true
		}
	}
	switch {
	case removed:
		s.sendCtrlLocked(unsubscribeAllFrame)
		if len(want) > 0 {
			s.sendCtrlLocked(subscribeFrame(want))
		}
	case added:
		s.sendCtrlLocked(subscribeFrame(add))
	}
	s.sentCover = want
}

// dispatch hands a delta's values (and meta entries) to every matching subscriber.
func (s *Stream) dispatch(f Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range f.Updates {
		s.dispatchLocked(f.Context, &u, u.Values, false)
		s.dispatchLocked(f.Context, &u, u.Meta, true)
	}
}

func (s *Stream) dispatchLocked(ctx string, u *Update, group []PathValue, meta bool) {
	for _, pv := range group {
		s.in.Received++
		v := sk.Delta{Context: ctx, Path: pv.Path, Value: pv.Value, Timestamp: u.Timestamp,
			Source: u.Source, Meta: meta}
		for _, sb := range s.subs {
			if matchPattern(sb.pattern, pv.Path) && sb.offer(v) {
				s.in.Dropped++
			}
		}
	}
}
