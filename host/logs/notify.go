package logs

import (
	"context"
	"time"
)

// NotifyInterval is the shortest time between two `logs` events.
const NotifyInterval = 500 * time.Millisecond

// NextEvent is the data of the `logs` SSE event.
type NextEvent struct {
	Next int64 `json:"next"`
}

// Notify publishes the `logs` event with the ring's next sequence until ctx ends: at once for
// the first line after a quiet period, then at most every NotifyInterval while lines keep
// arriving, and never when no line arrived since the last event. publish is called from
// Notify's goroutine only.
func (r *Ring) Notify(ctx context.Context, publish func(event string, data any)) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	r.waiters[ch] = struct{}{}
	announced := r.first + int64(len(r.lines))
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiters, ch)
		r.mu.Unlock()
	}()

	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		if !last.IsZero() {
			if wait := NotifyInterval - r.clock.Since(last); wait > 0 {
				t := r.clock.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.Chan():
				}
			}
		}
		next := r.Next()
		if next == announced {
			continue
		}
		publish("logs", NextEvent{Next: next})
		announced = next
		last = r.clock.Now()
	}
}
