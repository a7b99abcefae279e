package sktls

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/board"
	"devhost/host/health"
	"devhost/host/signalk/sktest/testcert"
	"devhost/host/testio"
)

// stallListener accepts TCP connections and never answers, so a handshake with it hangs.
func stallListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	acceptAll(t, ln, func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	})
	return ln.Addr().String()
}

type dialResult struct {
	conn net.Conn
	err  error
}

func dialAsync(m *Manager, ctx context.Context, addr string) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := m.DialTLSContext(ctx, "tcp", addr)
		ch <- dialResult{c, err}
	}()
	return ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testio.Await(t, hangGuard, what, cond, func(held bool) bool { return held })
}

// TestOneHandshakeAtATime: while one handshake hangs, another waits without even sending its
// hello; the hanging one ends at HandshakeTimeout (fake clock) and the other proceeds.
func TestOneHandshakeAtATime(t *testing.T) {
	r := newRig(t)
	stall := stallListener(t)
	srv := newTLSServer(t, testcert.SelfSigned(t, testcert.Loopback), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := dialAsync(r.m, ctx, stall)
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil { // the handshake timer: the slot is held
		t.Fatal(err)
	}
	second := dialAsync(r.m, ctx, srv.Addr())
	time.Sleep(100 * time.Millisecond)
	if n := srv.hellos.Load(); n != 0 {
		t.Fatalf("a second handshake started while one was running (%d hellos)", n)
	}
	select {
	case res := <-second:
		t.Fatalf("second dial returned while the slot was held: %v", res.err)
	default:
	}

	r.clock.Advance(HandshakeTimeout)
	res := <-first
	if res.err == nil || IsCertError(res.err) {
		t.Fatalf("hanging handshake: %v", res.err)
	}
	res = <-second
	if res.err != nil {
		t.Fatalf("second dial: %v", res.err)
	}
	res.conn.Close()
	if srv.hellos.Load() != 1 {
		t.Fatal("second handshake did not run")
	}
}

// TestGateCancelWhileWaiting: a dial whose context ends while it waits for the slot gives up
// and leaves the slot to others.
func TestGateCancelWhileWaiting(t *testing.T) {
	g := NewGate(GateOptions{})
	release, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	release()
	r2, err := g.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r2()
}

type reports struct {
	mu   sync.Mutex
	list []health.Condition
}

func (r *reports) Report(key string, state health.State, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, health.Condition{Key: key, State: state, Message: message})
	return nil
}

func (r *reports) snapshot() []health.Condition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]health.Condition(nil), r.list...)
}

// TestTLSMemoryDefers: with the board's largest free internal block below what a handshake
// needs, the handshake waits and tlsMemory is warn; when memory returns it proceeds and the
// condition clears.
func TestTLSMemoryDefers(t *testing.T) {
	var largest atomic.Int64
	largest.Store(8 * 1024)
	rep := &reports{}
	r := newRig(t)
	gate := NewGate(GateOptions{Clock: r.clock, Health: rep, Memory: func() board.Memory {
		return board.Memory{LargestBlock: largest.Load()}
	}})
	r.m = r.build(t, func(o *Options) { o.Gate = gate })
	srv := newTLSServer(t, testcert.SelfSigned(t, testcert.Loopback), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	res := dialAsync(r.m, ctx, srv.Addr())
	waitFor(t, "tlsMemory warn", func() bool { return len(rep.snapshot()) == 1 })
	if c := rep.snapshot()[0]; c.Key != health.KeyTLSMemory || c.State != health.Warn || c.Message == "" {
		t.Fatalf("report %+v", c)
	}
	// Still short after a poll: still deferred, reported once.
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(DeferPoll)
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if srv.hellos.Load() != 0 || len(rep.snapshot()) != 1 {
		t.Fatalf("deferred handshake ran or re-reported: hellos %d reports %d", srv.hellos.Load(), len(rep.snapshot()))
	}
	largest.Store(MinHandshakeBlock) // exactly enough
	r.clock.Advance(DeferPoll)
	out := <-res
	if out.err != nil {
		t.Fatalf("dial after memory returned: %v", out.err)
	}
	out.conn.Close()
	got := rep.snapshot()
	if len(got) != 2 || got[1].State != health.Normal {
		t.Fatalf("reports %+v, want warn then normal", got)
	}

	// Enough memory: no report at all.
	c, err := r.m.DialTLSContext(ctx, "tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if len(rep.snapshot()) != 2 {
		t.Fatal("a handshake with enough memory reported tlsMemory")
	}

	// Cancelled while deferred: the dial fails and the slot is free again.
	largest.Store(1024)
	cctx, ccancel := context.WithCancel(ctx)
	res = dialAsync(r.m, cctx, srv.Addr())
	waitFor(t, "second warn", func() bool { return len(rep.snapshot()) == 3 })
	ccancel()
	if out := <-res; out.err == nil {
		t.Fatal("cancelled deferred dial succeeded")
	}
	largest.Store(64 * 1024)
	c, err = r.m.DialTLSContext(ctx, "tcp", srv.Addr())
	if err != nil {
		t.Fatalf("slot not released after a cancelled deferral: %v", err)
	}
	c.Close()
}

// hangGuard bounds the waits of these tests. Each waits on a condition; the bound only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute
