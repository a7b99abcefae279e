package skstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
	"devhost/host/skstream/skpeer"
	"devhost/host/testio"
)

// wait bounds every real-time hand-off in these tests; nothing waits for a spec timer.
const wait = 5 * time.Second

// peer is the scripted server with the refusals these tests need on top: every request is
// counted, and may be refused or answered by raw before the upgrade.
type peer struct {
	*skpeer.Server

	mu     sync.Mutex
	reject int                              // answer the upgrade with this status instead
	raw    func(w http.ResponseWriter) bool // takes over the whole request when it returns true
	dials  atomic.Int32
}

func newPeer(t *testing.T) *peer { return newPeerTLS(t, false) }

func newPeerTLS(t *testing.T, tls bool) *peer {
	t.Helper()
	p := &peer{}
	p.Server = skpeer.Start(t, skpeer.Options{TLS: tls, Before: func(w http.ResponseWriter, _ *http.Request) bool {
		p.dials.Add(1)
		p.mu.Lock()
		reject, raw := p.reject, p.raw
		p.mu.Unlock()
		if raw != nil && raw(w) {
			return true
		}
		if reject != 0 {
			http.Error(w, "refused", reject)
			return true
		}
		return false
	}})
	return p
}

func (p *peer) set(fn func(p *peer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

// wireDelta is an outbound delta as the server reads it, with the tests' view of its values.
type wireDelta struct{ skpeer.Delta }

// nextDelta reads the next frame, which must be a delta with one update.
func nextDelta(t *testing.T, c *skpeer.Conn) wireDelta {
	t.Helper()
	b := c.Next(t)
	var d wireDelta
	if err := json.Unmarshal(b, &d); err != nil || len(d.Updates) != 1 {
		t.Fatalf("not a delta with one update: %s (%v)", b, err)
	}
	return d
}

// values flattens a delta to "path=value" strings in order.
func (d wireDelta) values() []string {
	var out []string
	for _, v := range d.Updates[0].Values {
		out = append(out, v.Path+"="+string(v.Value))
	}
	return out
}

// result is the error that arrives on ch, failing the test when none does in time.
func result(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(wait):
		t.Fatalf("%s did not return", what)
	}
	return nil
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testio.Await(t, wait, what, cond, func(held bool) bool { return held })
}

type fixture struct {
	t   *testing.T
	clk *clockwork.FakeClock
	s   *Stream
	p   *peer

	mu       sync.Mutex
	statuses []Status
	unauth   []Unauthorized
}

type fixOpt func(o *Options)

func withSettings(fn func(s *Settings)) fixOpt {
	return func(o *Options) { fn(&o.Settings) }
}

// newFixture builds a started stream on a fake clock (no target yet) and a scripted peer.
func newFixture(t *testing.T, opts ...fixOpt) *fixture {
	t.Helper()
	f := &fixture{t: t, clk: clockwork.NewFakeClockAt(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)), p: newPeer(t)}
	o := Options{
		Clock:    f.clk,
		Logger:   newFixtureLogger(t),
		Hostname: "probe-1",
		Settings: DefaultSettings(),
		Jitter:   func() float64 { return 0 },
		OnStatus: func(st Status) {
			f.mu.Lock()
			f.statuses = append(f.statuses, st)
			f.mu.Unlock()
		},
		OnUnauthorized: func(u Unauthorized) {
			f.mu.Lock()
			f.unauth = append(f.unauth, u)
			f.mu.Unlock()
		},
	}
	for _, fn := range opts {
		fn(&o)
	}
	f.s = New(o)
	t.Cleanup(f.s.Close)
	if err := f.s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

func newFixtureLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// connect points the stream at the peer and returns the connection once the hello is consumed.
func (f *fixture) connect() *skpeer.Conn {
	f.t.Helper()
	f.s.SetTarget(&Target{URL: f.p.URL(), Token: "tok-123"})
	c := f.p.Accept(f.t)
	eventually(f.t, "connected", f.s.Connected)
	return c
}

// advance moves the fake clock once n timers are waiting.
func (f *fixture) advance(n int, d time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := f.clk.BlockUntilContext(ctx, n); err != nil {
		f.t.Fatalf("waiting for %d timers: %v", n, err)
	}
	f.clk.Advance(d)
}

// flush waits until the stream has written everything it holds, advancing the fake clock by
// step while it waits: a backlog drains paced by the device's clock.
func (f *fixture) flush(step time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- f.s.Flush(ctx, time.Hour) }()
	for {
		select {
		case err := <-res:
			if err != nil {
				f.t.Fatalf("flush: %v", err)
			}
			return
		case <-time.After(10 * time.Millisecond):
			f.clk.Advance(step)
		}
	}
}

func (f *fixture) lastStatus() (Status, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) == 0 {
		return Status{}, 0
	}
	return f.statuses[len(f.statuses)-1], len(f.statuses)
}

// recorder collects what a callback receives on the stream's goroutines.
type recorder[T any] struct {
	mu    sync.Mutex
	items []T
}

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	r.items = append(r.items, v)
	r.mu.Unlock()
}

func (r *recorder[T]) get() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

func (r *recorder[T]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}

// modeState is a PUT-able path whose state is a non-empty string: the handler and the
// current-state getter the PUT tests register.
type modeState struct {
	mu   sync.Mutex
	mode string
}

func (m *modeState) path(path string) PutPath {
	return PutPath{Path: path, Handle: m.handle, Current: m.current}
}

func (m *modeState) handle(r sk.PutRequest, reply func(sk.PutResult, string)) {
	var v string
	if json.Unmarshal(r.Value, &v) != nil || v == "" {
		reply(sk.PutInvalid, "mode must be a non-empty string")
		return
	}
	m.mu.Lock()
	m.mode = v
	m.mu.Unlock()
	reply(sk.PutSuccess, "")
}

func (m *modeState) current() any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode
}
