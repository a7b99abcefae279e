package signalk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/events"
	"devhost/host/health"
	"devhost/host/signalk/sktest"
	"devhost/host/sk"
	"devhost/host/store"
	"devhost/host/testio"
)

// putState is a PUT-able state as a plugin keeps it: a PUT of a T sets it (anything else is
// refused as invalid), the state reader answers it, and each accepted value is also sent on
// seen when the test watches.
type putState[T any] struct {
	mu   sync.Mutex
	v    T
	seen chan T
}

func (p *putState[T]) handle(req sk.PutRequest, reply func(sk.PutResult, string)) {
	var v T
	if json.Unmarshal(req.Value, &v) != nil {
		reply(sk.PutInvalid, fmt.Sprintf("the state is a %T", v))
		return
	}
	p.mu.Lock()
	p.v = v
	p.mu.Unlock()
	if p.seen != nil {
		p.seen <- v
	}
	reply(sk.PutSuccess, "")
}

func (p *putState[T]) state() (any, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.v, true
}

// newFakeConfig is the configuration of the tests with the sk.* defaults.
func newFakeConfig() *sktest.Config {
	return sktest.NewConfig(map[string]any{
		"sk.server_port": 80, "sk.permissions": "readwrite", "sk.scheme": "auto",
		"sk.check_s": 3600, "sk.stall_s": 300, "sk.health_s": 10, "sk.discover_s": 60,
		"time.sk_fallback": true,
	})
}

// fakeStream records what the client asks of the stream.
type fakeStream struct {
	mu        sync.Mutex
	targets   []Target
	published []sk.Value
	contexts  []string
	sources   []sk.Source
	subs      map[string]func(sk.Delta)
	connected bool
	putErr    error
	puts      []string
	answers   []func(sk.PutAnswer)
	retries   int
}

func newFakeStream() *fakeStream { return &fakeStream{subs: map[string]func(sk.Delta){}} }

func (s *fakeStream) SetTarget(t Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets = append(s.targets, t)
}
func (s *fakeStream) target() Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.targets) == 0 {
		return Target{}
	}
	return s.targets[len(s.targets)-1]
}
func (s *fakeStream) Status() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]any{"connected": s.connected}
}
func (s *fakeStream) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}
func (s *fakeStream) setConnected(b bool) {
	s.mu.Lock()
	s.connected = b
	s.mu.Unlock()
}
func (s *fakeStream) Publish(values ...sk.Value) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = append(s.published, values...)
	return nil
}
func (s *fakeStream) PublishContext(context string, values ...sk.Value) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contexts = append(s.contexts, context)
	s.published = append(s.published, values...)
	return nil
}
func (s *fakeStream) PublishSource(src sk.Source, context string, values ...sk.Value) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, src)
	s.published = append(s.published, values...)
	return nil
}
func (s *fakeStream) values() []sk.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sk.Value(nil), s.published...)
}
func (s *fakeStream) DeclareMeta(string, json.RawMessage, time.Duration) error { return nil }
func (s *fakeStream) Subscribe(p string, fn func(sk.Delta)) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs[p] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, p)
	}, nil
}
func (s *fakeStream) sub(p string) func(sk.Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[p]
}
func (s *fakeStream) HandlePut(string, sk.PutHandler, func() any) (func(), error) {
	return func() {}, nil
}

func (s *fakeStream) Retry() {
	s.mu.Lock()
	s.retries++
	s.mu.Unlock()
}
func (s *fakeStream) Put(path string, _ json.RawMessage, answer func(sk.PutAnswer)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.putErr != nil {
		return s.putErr
	}
	s.puts = append(s.puts, path)
	s.answers = append(s.answers, answer)
	return nil
}
func (s *fakeStream) Flush(context.Context) error { return nil }

// peer is a scripted Signal K server.
type peer struct {
	*httptest.Server
	mu     sync.Mutex
	routes map[string]http.HandlerFunc // "METHOD /path"
	log    []seen
}

type seen struct {
	Method, Path, Auth, Accept string
	Body                       string
}

// serve logs each request and answers it with the route scripted for its method and path,
// 418 where none is.
func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.log = append(p.log, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), string(b)})
	f := p.routes[r.Method+" "+r.URL.Path]
	p.mu.Unlock()
	if f == nil {
		http.Error(w, "no script", http.StatusTeapot)
		return
	}
	f(w, r)
}

func newPeer(t *testing.T, tlsOn bool) *peer {
	p := &peer{routes: map[string]http.HandlerFunc{}}
	h := http.HandlerFunc(p.serve)
	if tlsOn {
		p.Server = httptest.NewTLSServer(h)
	} else {
		p.Server = httptest.NewServer(h)
	}
	t.Cleanup(p.Close)
	return p
}

func (p *peer) on(method, path string, f http.HandlerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[method+" "+path] = f
}

// answer scripts a fixed status and body.
func (p *peer) answer(method, path string, status int, body string) {
	p.on(method, path, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

// pendingRequest scripts an access request: the POST is accepted as pending and each poll of
// it is answered status and body.
func (p *peer) pendingRequest(status int, body string) {
	p.answer("POST", pathRequests, http.StatusAccepted, pendingJS)
	p.answer("GET", testHref, status, body)
}

// requestedRig starts a rig against a new peer whose access request is pending until a poll
// answers status and body, and waits until the rig is REQUESTED.
func requestedRig(t *testing.T, status int, body string) (*peer, *rig) {
	t.Helper()
	p := newPeer(t, false)
	p.pendingRequest(status, body)
	r := newRig(t, p, nil).start()
	r.waitState(StateRequested, true)
	return p, r
}

func (p *peer) calls(method, path string) []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seen
	for _, s := range p.log {
		if s.Method == method && s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

func (p *peer) hostPort() (string, int) {
	h, ps, _ := net.SplitHostPort(p.Listener.Addr().String())
	n, _ := strconv.Atoi(ps)
	return h, n
}

// fakeEvents records published events.
type fakeEvents struct {
	mu  sync.Mutex
	got []events.Event
	cbs []func() []events.Event
}

func (e *fakeEvents) Publish(name string, data any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, events.Event{Name: name, Data: data})
}
func (e *fakeEvents) OnConnect(cb func() []events.Event) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cbs = append(e.cbs, cb)
	return true
}
func (e *fakeEvents) count(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.got {
		if ev.Name == name {
			n++
		}
	}
	return n
}

// rig is a client under test.
// keep stores rec for p's address, as an earlier boot would have.
func (r *rig) keep(p *peer, rec record) {
	r.t.Helper()
	h, port := p.hostPort()
	b, _ := json.Marshal(rec)
	if err := r.st.Set(keyServerPrefix+"addr:"+addrKey(h, port), string(b)); err != nil {
		r.t.Fatal(err)
	}
}

// tokenRig is a client, not started yet, that kept the token tok1 from an earlier boot for a
// scripted peer (https when tlsOn) that accepts it.
func tokenRig(t *testing.T, tlsOn bool, mod func(*Options)) (*peer, *rig) {
	t.Helper()
	p := newPeer(t, tlsOn)
	selfOK(p, "tok1")
	r := newRig(t, p, mod)
	r.keep(p, record{Token: "tok1"})
	return p, r
}

// approvedRig is a client in APPROVED on a scripted peer.
func approvedRig(t *testing.T, mod func(*Options)) (*peer, *rig) {
	t.Helper()
	p, r := tokenRig(t, false, mod)
	r.start()
	r.waitState(StateApproved, true)
	return p, r
}

type rig struct {
	t      *testing.T
	clk    *clockwork.FakeClock
	cfg    *sktest.Config
	st     *store.Store
	stream *fakeStream
	ev     *fakeEvents
	hlth   *health.Registry
	c      *Client
	opts   Options
	cancel context.CancelFunc
	done   chan struct{}
}

// newRig builds a client pointed at p by sk.server_host (nil p: no server). mod adjusts the
// options before New.
func newRig(t *testing.T, p *peer, mod func(*Options)) *rig {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &rig{t: t, clk: clockwork.NewFakeClockAt(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)),
		cfg: newFakeConfig(), st: st, stream: newFakeStream(), ev: &fakeEvents{}}
	r.hlth = health.New(health.Options{Clock: r.clk})
	if p != nil {
		h, port := p.hostPort()
		r.cfg.Set("sk", "server_host", h)
		r.cfg.Set("sk", "server_port", port)
	}
	r.opts = Options{Clock: r.clk, Config: r.cfg, Store: st, Stream: r.stream, Events: r.ev,
		Health: r.hlth, Hostname: func() string { return "dev-ab12" }}
	if mod != nil {
		mod(&r.opts)
	}
	return r
}

func (r *rig) start() *rig {
	r.t.Helper()
	c, err := New(r.opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); _ = c.Run(ctx) }()
	r.t.Cleanup(r.stop)
	return r
}

func (r *rig) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// hangGuard bounds every wait of these tests. Each waits on a condition; the bound only
// turns a hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute

// eventually polls cond (a goroutine hand-off, never a spec timer).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testio.Await(t, hangGuard, what, cond, func(held bool) bool { return held })
}

// waitState waits for the token state and a scheduled retry (when wantTimer).
func (r *rig) waitState(state string, wantTimer bool) TokenStatus {
	r.t.Helper()
	var st TokenStatus
	eventually(r.t, "token state "+state, func() bool {
		st = r.c.tm.Status()
		return st.State == state && (!wantTimer || (st.NextRetryS != nil && r.nextRetry() > 0))
	})
	return st
}

// nextRetry answers the scheduled delay of the machine's timer.
func (r *rig) nextRetry() time.Duration {
	r.c.tm.mu.Lock()
	defer r.c.tm.mu.Unlock()
	if r.c.tm.due.IsZero() {
		return -1
	}
	return r.c.tm.due.Sub(r.clk.Now())
}

// postJSON calls a handler with a JSON body.
func postJSON(t *testing.T, h http.HandlerFunc, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/x", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h(rec, req)
	return rec
}
