package skstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
)

// wait bounds every real-time hand-off in these tests; nothing waits for a spec timer.
const wait = 5 * time.Second

const helloFrame = `{"name":"signalk-server","version":"2.32.0","self":"vessels.urn:mrn:signalk:uuid:00000000-0000-4000-8000-000000000001","roles":["master","main"],"timestamp":"2024-01-01T00:00:00.000Z"}`

// peer is a scripted Signal K server: it upgrades, sends a hello and records every frame.
type peer struct {
	t     *testing.T
	srv   *httptest.Server
	conns chan *peerConn

	mu     sync.Mutex
	reject int                              // answer the upgrade with this status instead
	hello  func(c *websocket.Conn)          // replaces the hello
	raw    func(w http.ResponseWriter) bool // takes over the whole request when it returns true
	stall  bool                             // never read after the hello
	dials  atomic.Int32
}

type peerConn struct {
	ws     *websocket.Conn
	req    *http.Request
	frames chan []byte
	closed chan struct{}
	wmu    sync.Mutex
}

func newPeer(t *testing.T) *peer { return newPeerTLS(t, false) }

func newPeerTLS(t *testing.T, tls bool) *peer {
	t.Helper()
	p := &peer{t: t, conns: make(chan *peerConn, 16)}
	up := websocket.Upgrader{}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.dials.Add(1)
		p.mu.Lock()
		reject, hello, raw, stall := p.reject, p.hello, p.raw, p.stall
		p.mu.Unlock()
		if raw != nil && raw(w) {
			return
		}
		if reject != 0 {
			http.Error(w, "refused", reject)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &peerConn{ws: ws, req: r, frames: make(chan []byte, 4096), closed: make(chan struct{})}
		if hello != nil {
			hello(ws)
		} else {
			_ = ws.WriteMessage(websocket.TextMessage, []byte(helloFrame))
		}
		go func() {
			defer close(c.closed)
			if stall {
				<-r.Context().Done()
				return
			}
			for {
				_, b, err := ws.ReadMessage()
				if err != nil {
					return
				}
				c.frames <- b
			}
		}()
		p.conns <- c
	}))
	if tls {
		p.srv.StartTLS()
	} else {
		p.srv.Start()
	}
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peer) url() string { return "ws://" + p.srv.Listener.Addr().String() }

func (p *peer) set(fn func(p *peer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

func (p *peer) accept(t *testing.T) *peerConn {
	t.Helper()
	select {
	case c := <-p.conns:
		t.Cleanup(func() { c.ws.Close() })
		return c
	case <-time.After(wait):
		t.Fatal("no connection from the stream")
	}
	return nil
}

func (p *peer) noConn(t *testing.T) {
	t.Helper()
	select {
	case <-p.conns:
		t.Fatal("unexpected connection")
	case <-time.After(50 * time.Millisecond):
	}
}

func (c *peerConn) next(t *testing.T) []byte {
	t.Helper()
	select {
	case b := <-c.frames:
		return b
	case <-time.After(wait):
		t.Fatal("no frame from the stream")
	}
	return nil
}

func (c *peerConn) none(t *testing.T) {
	t.Helper()
	select {
	case b := <-c.frames:
		t.Fatalf("unexpected frame %s", b)
	case <-time.After(50 * time.Millisecond):
	}
}

func (c *peerConn) send(t *testing.T, s string) {
	t.Helper()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (c *peerConn) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(wait):
		t.Fatal("the stream did not close the socket")
	}
}

// wireDelta is an outbound delta as the server reads it.
type wireDelta struct {
	Context string `json:"context"`
	Updates []struct {
		Timestamp *string `json:"timestamp"`
		Source    struct {
			Label string `json:"label"`
		} `json:"source"`
		Values []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		} `json:"values"`
	} `json:"updates"`
}

func (c *peerConn) nextDelta(t *testing.T) wireDelta {
	t.Helper()
	b := c.next(t)
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

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
func (f *fixture) connect() *peerConn {
	f.t.Helper()
	f.s.SetTarget(&Target{URL: f.p.url(), Token: "tok-123"})
	c := f.p.accept(f.t)
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

func (f *fixture) lastStatus() (Status, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) == 0 {
		return Status{}, 0
	}
	return f.statuses[len(f.statuses)-1], len(f.statuses)
}
