package skstream

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// waiters is how many WaitBuffered calls are registered.
func (f *fixture) waiters() int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return len(f.s.bufWaiters)
}

func TestWaitBuffered(t *testing.T) {
	if err := New(Options{Clock: clockwork.NewFakeClock()}).WaitBuffered(context.Background(), 0); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("before Start: %v, want ErrInvalidState", err)
	}
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.DrainPerS = 0, 1000 }))
	for i := 1; i <= 3; i++ {
		must(t, f.s.PublishNumber("p.n", float64(i)))
	}
	held := f.s.Status().BufferedBytes
	if held == 0 {
		t.Fatal("nothing buffered while disconnected")
	}
	if err := f.s.WaitBuffered(context.Background(), held); err != nil {
		t.Fatalf("with the ring at the limit: %v", err)
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.s.WaitBuffered(ended, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("disconnected, ctx ended: %v, want context.Canceled", err)
	}

	// A wait that ctx ends leaves nothing behind.
	ctx, cancelWait := context.WithCancel(context.Background())
	waited := make(chan error, 2)
	go func() { waited <- f.s.WaitBuffered(ctx, 0) }()
	eventually(t, "the wait registered", func() bool { return f.waiters() == 1 })
	cancelWait()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("ctx ended while waiting: %v, want context.Canceled", err)
	}
	if n := f.waiters(); n != 0 {
		t.Fatalf("%d waits left after ctx ended", n)
	}

	// Each wait ends when the ring reaches its own limit: one message written ends the wait
	// for two messages' bytes, not the wait for an empty ring.
	perMsg := held / 3
	two, empty := make(chan error, 1), make(chan error, 1)
	go func() { two <- f.s.WaitBuffered(context.Background(), 2*perMsg) }()
	go func() { empty <- f.s.WaitBuffered(context.Background(), 0) }()
	eventually(t, "both waits registered", func() bool { return f.waiters() == 2 })
	c := f.connect()
	next := func(want string) {
		t.Helper()
		if got := deltaValues(t, f.pump(c, time.Millisecond)); !slices.Equal(got, []string{want}) {
			t.Fatalf("got %v, want %s", got, want)
		}
	}
	next("p.n=1")
	if err := result(t, two, "the wait for two messages' bytes, one written,"); err != nil {
		t.Fatalf("wait for two messages' bytes: %v", err)
	}
	eventually(t, "one wait left", func() bool { return f.waiters() == 1 })
	select {
	case err := <-empty:
		t.Fatalf("the wait for an empty ring ended with two messages left: %v", err)
	default:
	}
	next("p.n=2")
	next("p.n=3")
	if err := result(t, empty, "the wait for an empty ring, drained,"); err != nil {
		t.Fatalf("after the drain: %v", err)
	}

	// Close ends a wait in progress.
	f.s.NetworkDown()
	eventually(t, "disconnected", func() bool { return !f.s.Connected() })
	must(t, f.s.PublishNumber("p.n", 4))
	go func() { waited <- f.s.WaitBuffered(context.Background(), 0) }()
	f.s.Close()
	if err := result(t, waited, "a wait ended by Close"); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("after Close: %v, want ErrInvalidState", err)
	}
}
