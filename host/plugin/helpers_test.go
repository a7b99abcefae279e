package plugin

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/config"
	"devhost/host/health"
	"devhost/host/httpd"
	"devhost/host/sk"
	"devhost/host/store"
	"devhost/host/testio"
	runtimens "devhost/runtime-ns"
)

var (
	tmpRoot   string
	buildOnce sync.Once
	wasmMod   []byte
	buildErr  error
	// sharedCache is one compilation cache for every test, so the test module compiles once.
	sharedCache string
)

// hangGuard bounds every wait of these tests. Each waits on a condition; the bound only
// turns a hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute

func TestMain(m *testing.M) {
	var err error
	tmpRoot, err = os.MkdirTemp("", "plugin-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedCache = filepath.Join(tmpRoot, "cache")
	code := m.Run()
	_ = os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// buildWasm builds a plugin package for wasip1 into dir.
func buildWasm(pkg, out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	cmd := exec.Command(gobin, "build", "-buildmode=c-shared", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// testModule is the test plugin's Wasm, built once per test binary.
func testModule(t testing.TB) []byte {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(tmpRoot, "multi.wasm")
		if buildErr = buildWasm("./testdata/multi", out); buildErr == nil {
			wasmMod, buildErr = os.ReadFile(out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return wasmMod
}

func loadKey(t testing.TB, name string) *rsa.PrivateKey {
	t.Helper()
	k, err := abi.ReadPrivateKey(filepath.Join("testdata", "keys", name+".pem"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func manifest(id string, caps ...abi.Capability) abi.Manifest {
	m := abi.Manifest{ID: id, Name: "Test " + id, Version: "1.0.0", ABI: 1, Capabilities: caps}
	if m.Capabilities == nil {
		m.Capabilities = []abi.Capability{}
	}
	if abi.HasCapability(caps, abi.CapHTTP) {
		m.Routes = []abi.Route{{Method: "GET", Path: "/" + id + "/:what"}, {Method: "POST", Path: "/" + id + "/:what"}}
	}
	if abi.HasCapability(caps, abi.CapEvents) {
		m.Events = []string{id}
	}
	return m
}

func pack(t testing.TB, m abi.Manifest, key *rsa.PrivateKey) []byte {
	t.Helper()
	b, err := abi.Pack(m, testModule(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// healthAdapter is the device wiring's adapter over the health registry.
type healthAdapter struct{ r *health.Registry }

func (h healthAdapter) Report(key, state, msg string) error {
	return h.r.Report(key, health.State(state), msg)
}
func (h healthAdapter) ReportFatal(key, state, msg string) error {
	return h.r.ReportFatal(key, health.State(state), msg)
}

// eventLog records published SSE events.
type eventLog struct {
	mu  sync.Mutex
	evs []recorded
}

type recorded struct {
	name string
	data []byte
}

func (l *eventLog) publish(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(err)
	}
	l.mu.Lock()
	l.evs = append(l.evs, recorded{name, b})
	l.mu.Unlock()
}

func (l *eventLog) named(name string) []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recorded
	for _, e := range l.evs {
		if e.name == name {
			out = append(out, e)
		}
	}
	return out
}

// logCapture keeps log lines.
type logCapture struct {
	mu    sync.Mutex
	lines []string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	c.mu.Lock()
	c.lines = append(c.lines, b.String())
	c.mu.Unlock()
	return nil
}
func (c *logCapture) WithAttrs(as []slog.Attr) slog.Handler { return &attrHandler{c, as} }
func (c *logCapture) WithGroup(string) slog.Handler         { return c }

func (c *logCapture) has(sub string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

type attrHandler struct {
	c  *logCapture
	as []slog.Attr
}

func (h *attrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r.AddAttrs(h.as...)
	return h.c.Handle(ctx, r)
}
func (h *attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h.c, append(append([]slog.Attr(nil), h.as...), as...)}
}
func (h *attrHandler) WithGroup(string) slog.Handler { return h }

// harness is a device around a Manager: real configuration, run-time namespace registry,
// health table and HTTP server; fake Signal K client and board.
type harness struct {
	t         *testing.T
	dir       string
	clk       *clockwork.FakeClock
	st        *store.Store
	cfg       *config.Config
	rtns      *runtimens.Registry
	health    *health.Registry
	srv       *httpd.Server
	ts        *httptest.Server
	sk        *fakeSK
	gpio      *fakeGPIO
	can       *fakeCAN
	ble       *fakeBLE
	power     *fakePower
	events    *eventLog
	logs      *logCapture
	opts      Options
	devConfig swapConfig
	devHealth swapHealth
	m         *Manager
	cur       atomic.Pointer[Manager]
	cancel    context.CancelFunc
	done      chan struct{}
}

func newHarness(t *testing.T, tweak ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clk: clockwork.NewFakeClock(), sk: newFakeSK(), gpio: newFakeGPIO(),
		can: &fakeCAN{}, ble: &fakeBLE{}, power: &fakePower{}, events: &eventLog{}, logs: &logCapture{}}
	st, err := store.Open(filepath.Join(h.dir, "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	h.st = st
	t.Cleanup(func() { _ = st.Close() })
	h.device()
	h.device()
	h.srv = httpd.New(httpd.Options{})
	h.ts = httptest.NewServer(h.srv)
	t.Cleanup(h.ts.Close)
	h.opts = Options{
		Dir: filepath.Join(h.dir, "plugins"), CacheDir: sharedCache,
		TrustedKeys: []*rsa.PublicKey{&loadKey(t, "publisher").PublicKey},
		Clock:       h.clk, Logger: slog.New(h.logs), Publish: h.events.publish, DeviceID: "beef",
		Config: &h.devConfig, Health: &h.devHealth,
		Router: h.srv, WallClock: func() (time.Time, string, bool) { return time.UnixMilli(1_700_000_000_000), "sntp", true },
		Power: h.power, GPIO: h.gpio, CAN: h.can, BLE: h.ble, SignalK: h.sk,
		CallTimeout: 2 * time.Second,
	}
	for _, f := range tweak {
		f(&h.opts)
	}
	h.boot()
	return h
}

// device builds the configuration, the namespace registry and the health table afresh over
// the same store, as a boot of the device does.
func (h *harness) device() {
	h.t.Helper()
	cfg, err := config.New(h.st, slog.New(slog.DiscardHandler))
	if err != nil {
		h.t.Fatal(err)
	}
	h.cfg = cfg
	h.health = health.New(health.Options{Clock: h.clk})
	h.rtns = runtimens.New(h.cfg, healthAdapter{h.health})
	h.devConfig.set(DeviceConfig{Registry: h.rtns, Config: h.cfg})
	h.devHealth.set(healthAdapter{h.health})
}

// swapConfig and swapHealth let the Manager's options outlive a simulated reboot.
type swapConfig struct {
	mu sync.Mutex
	c  ConfigRegistry
}

func (s *swapConfig) set(c ConfigRegistry) { s.mu.Lock(); s.c = c; s.mu.Unlock() }
func (s *swapConfig) get() ConfigRegistry  { s.mu.Lock(); defer s.mu.Unlock(); return s.c }
func (s *swapConfig) Register(id string, d []byte) (string, error) {
	return s.get().Register(id, d)
}
func (s *swapConfig) Unregister(id string) error                { return s.get().Unregister(id) }
func (s *swapConfig) Purge(id string) error                     { return s.get().Purge(id) }
func (s *swapConfig) Values(ns string) (json.RawMessage, error) { return s.get().Values(ns) }

type swapHealth struct {
	mu sync.Mutex
	h  Health
}

func (s *swapHealth) set(h Health) { s.mu.Lock(); s.h = h; s.mu.Unlock() }
func (s *swapHealth) get() Health  { s.mu.Lock(); defer s.mu.Unlock(); return s.h }
func (s *swapHealth) Report(k, st, m string) error {
	return s.get().Report(k, st, m)
}
func (s *swapHealth) ReportFatal(k, st, m string) error { return s.get().ReportFatal(k, st, m) }

// boot builds a Manager over the harness's partition and registers its routes once.
func (h *harness) boot() {
	h.t.Helper()
	m, err := New(h.opts)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.m == nil {
		// The routes go to whichever Manager is current, so a reboot keeps the server.
		for i, rt := range m.Routes() {
			i := i
			rt.Handler = func(w http.ResponseWriter, r *http.Request) { h.cur.Load().Routes()[i].Handler(w, r) }
			if err := h.srv.Handle(rt); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	h.m = m
	h.cur.Store(m)
}

func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	m := h.m
	go func() {
		defer close(h.done)
		_ = m.Run(ctx)
	}()
	h.t.Cleanup(h.stop)
}

// stop ends Run (a shutdown) and waits for it.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(hangGuard):
		h.t.Error("Run did not return after its context ended")
	}
	h.cancel = nil
}

// reboot stops the Manager and starts a new one over the same partition.
func (h *harness) reboot() {
	h.stop()
	h.device()
	h.boot()
	h.run()
}

func (h *harness) do(method, path string, body any) (int, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, h.ts.URL+httpd.Prefix+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// install installs a bundle directly and fails the test on error.
func (h *harness) install(b []byte, grant []abi.Capability) InstallResult {
	h.t.Helper()
	res, err := h.m.Install(b, grant)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// start installs plugin id, asking for caps (all granted) and signed with the publisher
// key, and waits until it runs.
func (h *harness) start(id string, caps ...abi.Capability) Status {
	h.t.Helper()
	h.install(pack(h.t, manifest(id, caps...), loadKey(h.t, "publisher")), nil)
	return h.waitState(id, StateRunning)
}

// seen is a plugin's status as a wait sees it; it prints what a failed wait needs.
type seen struct {
	Status
	listed bool
}

func (v seen) String() string {
	if !v.listed {
		return "not listed"
	}
	return fmt.Sprintf("state %s (last error %v)", v.State, deref(v.LastError))
}

// waitState waits (polling) until plugin id is in state st. Loading involves real compile
// time, so the bound is generous.
func (h *harness) waitState(id string, st State) Status {
	h.t.Helper()
	v := testio.Await(h.t, hangGuard, fmt.Sprintf("plugin %s in state %s", id, st), func() seen {
		s, ok := h.m.Status(id)
		return seen{s, ok}
	}, func(v seen) bool { return v.listed && v.State == st })
	return v.Status
}

// waitFor polls cond.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testio.Await(t, hangGuard, what, cond, func(held bool) bool { return held })
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// condition returns a health condition by key.
func (h *harness) condition(key string) (health.Condition, bool) {
	for _, c := range h.health.Conditions() {
		if c.Key == key {
			return c, true
		}
	}
	return health.Condition{}, false
}

// pingOK checks that the host's own HTTP API answers.
func (h *harness) pingOK() {
	h.t.Helper()
	code, body := h.do(http.MethodGet, "/plugins", nil)
	if code != http.StatusOK {
		h.t.Fatalf("GET /plugins: %d %s", code, body)
	}
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// publishSession is a session of a plugin granted signalk.publish, with its memory to call
// host functions through; the returned call copies msg there and invokes fn.
func publishSession(t *testing.T, clk clockwork.Clock, fsk *fakeSK) (*session, func(fn hostFunc, msg []byte) int32) {
	t.Helper()
	m, err := New(Options{Dir: t.TempDir(), TrustedKeys: []*rsa.PublicKey{&loadKey(t, "publisher").PublicKey},
		SignalK: fsk, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p := m.newPlugin(record{ID: "gw", Wanted: WantRunning})
	p.man = manifest("gw", abi.CapSKPublish)
	buf := make([]byte, 4096)
	s := newSession(p, &instance{alloc: &allocator{}, memory: &linearMem{buf: buf}}, p.inbox.open(), []string{string(abi.CapSKPublish)})
	t.Cleanup(func() {
		s.end()
		p.inbox.close()
	})
	return s, func(fn hostFunc, msg []byte) int32 {
		t.Helper()
		copy(buf, msg)
		return s.invoke(abi.CapSKPublish, fn, []uint64{0, uint64(len(msg))})
	}
}

// fakeSK records what plugins do with Signal K.
type fakeSK struct {
	mu        sync.Mutex
	values    []sk.Value
	ctxValues map[string][]sk.Value
	srcValues []sourced
	metas     map[string]string
	subs      map[string]func(sk.Delta)
	puts      map[string]sk.PutHandler
	sent      []sk.Value
	answers   []func(sk.PutAnswer)
	down      bool
}

func newFakeSK() *fakeSK {
	return &fakeSK{metas: map[string]string{}, subs: map[string]func(sk.Delta){}, puts: map[string]sk.PutHandler{}}
}

func (f *fakeSK) Publish(vs ...sk.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values = append(f.values, vs...)
	return nil
}

func (f *fakeSK) PublishContext(context string, vs ...sk.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctxValues == nil {
		f.ctxValues = map[string][]sk.Value{}
	}
	f.ctxValues[context] = append(f.ctxValues[context], vs...)
	return nil
}

func (f *fakeSK) PublishSource(src sk.Source, context string, vs ...sk.Value) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srcValues = append(f.srcValues, sourced{src, context, append([]sk.Value(nil), vs...)})
	return nil
}

// sourced is one PublishSource call.
type sourced struct {
	src     sk.Source
	context string
	values  []sk.Value
}

func (f *fakeSK) DeclareMeta(path string, meta json.RawMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.metas[path] = string(meta)
	return nil
}

func (f *fakeSK) Subscribe(p string, d func(sk.Delta)) (func(), error) {
	return register(&f.mu, f.subs, p, d), nil
}

func (f *fakeSK) HandlePut(p string, h sk.PutHandler) (func(), error) {
	return register(&f.mu, f.puts, p, h), nil
}

// register puts v under key in m, which mu guards, and answers the function that removes it.
func register[K comparable, V any](mu *sync.Mutex, m map[K]V, key K, v V) func() {
	mu.Lock()
	defer mu.Unlock()
	m[key] = v
	return func() {
		mu.Lock()
		delete(m, key)
		mu.Unlock()
	}
}

func (f *fakeSK) Put(path string, v json.RawMessage, answer func(sk.PutAnswer)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fmt.Errorf("stream down")
	}
	f.sent = append(f.sent, sk.Value{Path: path, Value: v})
	f.answers = append(f.answers, answer)
	return nil
}

func (f *fakeSK) deliver(pattern string, d sk.Delta) bool {
	f.mu.Lock()
	fn := f.subs[pattern]
	f.mu.Unlock()
	if fn == nil {
		return false
	}
	fn(d)
	return true
}

func (f *fakeSK) handler(pattern string) sk.PutHandler {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts[pattern]
}

func (f *fakeSK) published() []sk.Value {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sk.Value(nil), f.values...)
}

// put sends an inbound PUT to the handler of pattern and collects the replies.
func (f *fakeSK) put(t testing.TB, pattern, path string, value string) chan putReply {
	t.Helper()
	h := f.handler(pattern)
	if h == nil {
		t.Fatalf("no PUT handler for %s", pattern)
	}
	ch := make(chan putReply, 2)
	h(sk.PutRequest{Path: path, Value: json.RawMessage(value)}, func(r sk.PutResult, msg string) { ch <- putReply{r, msg} })
	return ch
}

type putReply struct {
	result sk.PutResult
	msg    string
}

func waitReply(t testing.TB, ch chan putReply) putReply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		t.Fatal("no PUT reply")
	}
	return putReply{}
}

type fakeGPIO struct {
	mu      sync.Mutex
	levels  map[int]bool
	faulty  map[int]bool
	watches map[int]func(int, bool)
	writes  []string
}

func newFakeGPIO() *fakeGPIO {
	return &fakeGPIO{levels: map[int]bool{1: true}, faulty: map[int]bool{}, watches: map[int]func(int, bool){}}
}

func (g *fakeGPIO) Read(pin int) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pin > 40 {
		return false, fmt.Errorf("pin %d: %w", pin, abi.ErrNotFound)
	}
	return g.levels[pin], nil
}

func (g *fakeGPIO) Write(pin int, high bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.faulty[pin] {
		return fmt.Errorf("pin %d shorted", pin)
	}
	g.levels[pin] = high
	g.writes = append(g.writes, fmt.Sprintf("%d=%v", pin, high))
	return nil
}

func (g *fakeGPIO) Watch(pin int, fn func(int, bool)) (func(), error) {
	return register(&g.mu, g.watches, pin, fn), nil
}

func (g *fakeGPIO) edge(pin int, high bool) bool {
	g.mu.Lock()
	fn := g.watches[pin]
	g.mu.Unlock()
	if fn == nil {
		return false
	}
	fn(pin, high)
	return true
}

func (g *fakeGPIO) wrote(s string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.writes {
		if w == s {
			return true
		}
	}
	return false
}

type fakeCAN struct {
	mu   sync.Mutex
	sent []CANFrame
	rx   func(CANFrame)
}

func (c *fakeCAN) Send(f CANFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, f)
	return nil
}

func (c *fakeCAN) Receive(fn func(CANFrame)) (func(), error) { return set(&c.mu, &c.rx, fn), nil }

// set stores v in *field, which mu guards, and answers the function that clears it again.
func set[T any](mu *sync.Mutex, field *T, v T) func() {
	mu.Lock()
	defer mu.Unlock()
	*field = v
	return func() {
		mu.Lock()
		var zero T
		*field = zero
		mu.Unlock()
	}
}

func (c *fakeCAN) inject(f CANFrame) bool {
	c.mu.Lock()
	fn := c.rx
	c.mu.Unlock()
	if fn == nil {
		return false
	}
	fn(f)
	return true
}

type fakeBLE struct {
	mu       sync.Mutex
	adv      []byte
	scanning bool
}

func (b *fakeBLE) Advertise(d []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adv = append([]byte(nil), d...)
	return nil
}
func (b *fakeBLE) StopAdvertising() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.adv = nil
	return nil
}
func (b *fakeBLE) Scan(func(BLEAdvert)) (func(), error) { return set(&b.mu, &b.scanning, true), nil }

// fakePower counts holds per plugin, as the duty cycle does per owner.
type fakePower struct {
	mu    sync.Mutex
	holds map[string]int
}

func (p *fakePower) Hold(plugin string) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holds == nil {
		p.holds = map[string]int{}
	}
	p.holds[plugin]++
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.holds[plugin]--; p.holds[plugin] == 0 {
				delete(p.holds, plugin)
			}
		})
	}
}

// count is the total of the holds.
func (p *fakePower) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.holds {
		n += c
	}
	return n
}

// by is a copy of the holds per plugin.
func (p *fakePower) by() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.holds)
}

var osReadFile = os.ReadFile

// waitCallInProgress waits until p's current session is inside a call to the plugin.
func waitCallInProgress(t *testing.T, p *plugin) {
	t.Helper()
	waitFor(t, "the call in progress", func() bool {
		s := p.currentSession()
		if s == nil {
			return false
		}
		s.callMu.Lock()
		defer s.callMu.Unlock()
		return s.cancel != nil
	})
}
