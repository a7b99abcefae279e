package sntp

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/clock"
	"devhost/host/testio"
)

// script answers the fake NTP exchange: per server, an error or a valid time.
type script struct {
	mu      sync.Mutex
	fail    map[string]bool
	answer  time.Time
	queries chan string
}

func (s *script) query(_ context.Context, server string) (time.Time, error) {
	s.queries <- server
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[server] {
		return time.Time{}, errors.New("no answer")
	}
	return s.answer, nil
}

func (s *script) set(server string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail[server] = fail
}

type dhcp struct{ server string }

func (d dhcp) NTPServer() string { return d.server }

type harness struct {
	t     *testing.T
	c     *Client
	clk   *clockwork.FakeClock
	sc    *script
	clock *clock.Clock
}

var when = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, cfg Config, d DHCPServer) *harness {
	t.Helper()
	h := &harness{t: t, clk: clockwork.NewFakeClock(),
		sc: &script{fail: map[string]bool{}, answer: when, queries: make(chan string, 64)}}
	h.clock = clock.New(clock.Options{Clock: h.clk})
	c, err := New(Options{Config: cfg, DHCP: d, Clock: h.clk, Query: h.sc.query,
		Set: func(t time.Time) error { return h.clock.Set(clock.SourceSNTP, t) }})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return h
}

// polled waits for one poll's queries, in order.
func (h *harness) polled(servers ...string) {
	h.t.Helper()
	for _, want := range servers {
		select {
		case got := <-h.sc.queries:
			if got != want {
				h.t.Fatalf("queried %s, want %s", got, want)
			}
		case <-time.After(10 * time.Second):
			h.t.Fatalf("no query of %s", want)
		}
	}
}

// next checks that the next poll is armed exactly d ahead: nothing at d-1ns, a poll at d.
func (h *harness) next(d time.Duration, servers ...string) {
	h.t.Helper()
	h.waitTimer()
	h.clk.Advance(d - time.Nanosecond)
	h.quiet()
	h.clk.Advance(time.Nanosecond)
	h.polled(servers...)
}

func (h *harness) waitTimer() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.clk.BlockUntilContext(ctx, 1); err != nil {
		h.t.Fatalf("no poll timer armed: %v", err)
	}
}

// quiet checks that no query is under way: the armed timer is still the only waiter.
func (h *harness) quiet() {
	h.t.Helper()
	h.waitTimer()
	select {
	case s := <-h.sc.queries:
		h.t.Fatalf("unexpected query of %s", s)
	default:
	}
}

// waitStatus waits until the status satisfies cond (Run updates it after the queries).
func (h *harness) waitStatus(what string, cond func(Status) bool) Status {
	h.t.Helper()
	return testio.Await(h.t, 10*time.Second, "status "+what, h.c.Status, cond)
}

func TestNothingBeforeTheFirstNetworkUp(t *testing.T) {
	h := newHarness(t, Config{Enabled: true, Servers: []string{"a", ""}}, nil)
	if st := h.c.Status(); st.Running || st.Synced || len(st.Servers) != 1 || st.Servers[0] != "a" {
		t.Fatalf("status before network-up %+v", st)
	}
	h.clk.Advance(24 * time.Hour)
	select {
	case s := <-h.sc.queries:
		t.Fatalf("queried %s before network-up", s)
	case <-time.After(20 * time.Millisecond):
	}
	if _, src, _ := h.clock.Now(); src != clock.SourceNone {
		t.Fatalf("clock source %v", src)
	}
}

func TestDisabledNeverPolls(t *testing.T) {
	h := newHarness(t, Config{Enabled: false, Servers: []string{"a"}}, nil)
	h.c.NetworkUp()
	h.clk.Advance(24 * time.Hour)
	select {
	case s := <-h.sc.queries:
		t.Fatalf("queried %s while disabled", s)
	case <-time.After(20 * time.Millisecond):
	}
	if st := h.c.Status(); st.Running || st.Enabled {
		t.Fatalf("status %+v", st)
	}
}

// The state machine, transition by transition.
func TestPollingTransitions(t *testing.T) {
	h := newHarness(t, Config{Enabled: true, Servers: []string{"a", "b"}, FromDHCP: true}, dhcp{"d"})
	h.sc.set("a", true)

	// First network-up: polls at once, in order, until one answers; the clock is sntp.
	h.c.NetworkUp()
	h.polled("a", "b")
	st := h.waitStatus("synced", func(s Status) bool { return s.Synced })
	if !st.Running || st.Server != "b" || st.Failures != 0 {
		t.Fatalf("after the first poll %+v", st)
	}
	if now, src, synced := h.clock.Now(); src != clock.SourceSNTP || !synced || !now.Equal(when) {
		t.Fatalf("clock %v %v %v", now, src, synced)
	}
	// SNTP outranks everything: a manual set is refused.
	if err := h.clock.Set(clock.SourceManual, when.Add(time.Hour)); !errors.Is(err, clock.ErrOutranked) {
		t.Fatalf("manual over sntp: %v", err)
	}

	// Next poll an Interval later.
	h.next(Interval, "a", "b")

	// Every server fails (the DHCP one last): 2 s, 4 s, 8 s ... capped at 5 minutes.
	h.sc.set("b", true)
	h.sc.set("d", true)
	h.next(Interval, "a", "b", "d")
	h.waitStatus("one failure", func(s Status) bool { return s.Failures == 1 })
	for _, d := range []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 300, 300} {
		h.next(d*time.Second, "a", "b", "d")
	}
	h.waitStatus("eleven failures", func(s Status) bool { return s.Failures == 11 })
	// The clock keeps the last answer's time and source.
	if _, src, _ := h.clock.Now(); src != clock.SourceSNTP {
		t.Fatalf("clock source after failures %v", src)
	}

	// The DHCP-offered server answers: backoff reset.
	h.sc.set("d", false)
	h.next(300*time.Second, "a", "b", "d")
	if st := h.waitStatus("synced by d", func(s Status) bool { return s.Failures == 0 }); st.Server != "d" {
		t.Fatalf("status %+v", st)
	}
	h.sc.set("d", true)
	h.next(Interval, "a", "b", "d")
	h.next(2*time.Second, "a", "b", "d")

	// Network down: the armed poll is dropped; nothing is polled while down.
	// The timer may fire before Run sees the kick: either way no query goes out.
	h.waitTimer()
	h.c.NetworkDown()
	h.clk.Advance(time.Hour)
	select {
	case s := <-h.sc.queries:
		t.Fatalf("queried %s while down", s)
	case <-time.After(20 * time.Millisecond):
	}

	// Network up again: a poll at once, and the backoff starts from 2 s again.
	h.c.NetworkUp()
	h.polled("a", "b", "d")
	h.next(2*time.Second, "a", "b", "d")
	h.next(4*time.Second, "a", "b", "d")

	// A route change (down then up, seen together) polls at once too.
	h.waitTimer()
	h.c.NetworkDown()
	h.c.NetworkUp()
	h.polled("a", "b", "d")
}

func TestDHCPServerOnlyWhenAsked(t *testing.T) {
	h := newHarness(t, Config{Enabled: true, Servers: []string{"a"}, FromDHCP: false}, dhcp{"d"})
	h.sc.set("a", true)
	h.c.NetworkUp()
	h.polled("a")
	h.next(BackoffMin, "a")

	// With from_dhcp on but no lease offering a server, the configured ones only.
	h2 := newHarness(t, Config{Enabled: true, Servers: []string{"a"}, FromDHCP: true}, dhcp{""})
	h2.sc.set("a", true)
	h2.c.NetworkUp()
	h2.polled("a")
	h2.next(BackoffMin, "a")
}

// An answer the clock refuses (a 1970 value) is a failed poll: the clock stays unset.
func TestOutOfRangeAnswerRefused(t *testing.T) {
	h := newHarness(t, Config{Enabled: true, Servers: []string{"a"}}, nil)
	h.sc.mu.Lock()
	h.sc.answer = time.Unix(0, 0)
	h.sc.mu.Unlock()
	h.c.NetworkUp()
	h.polled("a")
	h.waitStatus("one failure", func(s Status) bool { return s.Failures == 1 })
	if now, src, _ := h.clock.Now(); src != clock.SourceNone || !now.IsZero() {
		t.Fatalf("clock %v %v", now, src)
	}
	if d := h.clock.Document(); d.Now != 0 || d.ISO != "" {
		t.Fatalf("time document %+v", d)
	}
	h.next(BackoffMin, "a")
}

func TestNewNeedsAClock(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without Set succeeded")
	}
}
