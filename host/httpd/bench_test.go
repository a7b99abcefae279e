package httpd_test

// Benchmarks of the device's HTTP path beside the bare baselines the performance figures
// compare against (cmd/devbench measures the same figures on the built binary):
//
//   - http.ping, http.config_get: the device's full stack (this server with the device's
//     authentication, configuration and store) against a bare net/http handler answering the
//     same bytes, both over loopback with keep-alive connections, interleaved in rounds so
//     drift hits both sides. The `ratio` metric is device req/s over bare req/s.
//   - http.put_config: sequential PUT /api/v1/config writes, each a durable write, against one
//     raw write + fsync of a small record in the same folder. `ratio` is device latency over
//     the raw write's.
//
// The load comes from this process, so the client's own cost dilutes the GET ratios a little
// towards 1, as wrk's does on a shared machine; allocs/op and the handler-only benchmarks
// (no network) show the server's own work.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
	"devhost/host/auth"
	"devhost/host/config"
	"devhost/host/httpd"
	"devhost/host/httpd/httpdtest"
	"devhost/host/store"
	"devhost/host/system"
)

const benchKey = "bench-key-0123456789abcdef"

// stack is the HTTP part of the device wired as host/device wires it.
type stack struct {
	srv *httpd.Server
	cfg *config.Config
	st  *store.Store
	dir string
}

type authCheck struct{ a *auth.Auth }

func (c authCheck) Check(r *http.Request) error                 { _, err := c.a.Check(r); return err }
func (c authCheck) WriteError(w http.ResponseWriter, err error) { c.a.WriteError(w, err) }

func newStack(b *testing.B) *stack {
	b.Helper()
	dir := b.TempDir()
	st, err := store.Open(filepath.Join(dir, "nvs"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	cfg, err := config.New(st, nil, config.BuiltinFor("0a1b2c")...)
	if err != nil {
		b.Fatal(err)
	}
	if err := cfg.Set("httpd", "api_key", benchKey); err != nil {
		b.Fatal(err)
	}
	a := auth.New(auth.Options{
		Key:        func() string { return cfg.String("httpd", "api_key") },
		SessionTTL: func() time.Duration { return time.Duration(cfg.Int("httpd", "session_ttl_s")) * time.Second },
		Recovery:   true,
	})
	sys := system.New(system.Options{Clock: clockwork.NewRealClock(), AuthWanted: func() bool { return cfg.String("httpd", "api_key") != "" }})
	srv := httpd.New(httpd.Options{Auth: authCheck{a},
		AllowedHosts: func() []string {
			return append([]string{cfg.String("net", "hostname") + ".local"}, config.HostNames(cfg.String("httpd", "hosts"))...)
		},
		AnyHost: a.OnPortal})
	for _, rs := range [][]api.Route{sys.Routes(), cfg.Routes(), a.Routes()} {
		if err := srv.HandleAll(rs); err != nil {
			b.Fatal(err)
		}
	}
	return &stack{srv: srv, cfg: cfg, st: st, dir: dir}
}

// serve answers h on a fresh loopback listener until the benchmark ends: the device's server
// as it is, any other handler through net/http alone.
func serve(b *testing.B, h http.Handler) string {
	var s httpdtest.Server = plainServer{h}
	if dev, ok := h.(*httpd.Server); ok {
		s = dev
	}
	return strings.TrimPrefix(httpdtest.Start(b, s), "http://")
}

// plainServer serves a handler with net/http alone, the baseline the device is measured against.
type plainServer struct{ h http.Handler }

func (p plainServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: p.h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 60 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return srv.Serve(ln)
}

// canned is one captured answer the bare handler replays.
type canned struct {
	status int
	header http.Header
	body   []byte
	framed bool // the device sent a Content-Length
}

// bare answers every request with c, as cmd/devbench's anchor does: same status, headers and
// body, framed the same way, with no checks at all.
func bare(c canned) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		for k, v := range c.header {
			h[k] = v
		}
		if c.framed {
			h.Set("Content-Length", strconv.Itoa(len(c.body)))
		}
		w.WriteHeader(c.status)
		_, _ = w.Write(c.body)
	})
}

// client is one keep-alive connection sending a fixed request.
type client struct {
	c   net.Conn
	br  *bufio.Reader
	req []byte
}

func dial(b *testing.B, addr string, req []byte) *client {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return &client{c: c, br: bufio.NewReaderSize(c, 16<<10), req: req}
}

// do sends the request once and reads the whole answer.
func (c *client) do() (canned, error) {
	if _, err := c.c.Write(c.req); err != nil {
		return canned{}, fmt.Errorf("write: %w", err)
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return canned{}, fmt.Errorf("read: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return canned{}, fmt.Errorf("body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return canned{}, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	h := resp.Header.Clone()
	h.Del("Date")
	h.Del("Content-Length")
	return canned{status: resp.StatusCode, header: h, body: body, framed: resp.ContentLength >= 0}, nil
}

func request(method, addr, path, key string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: bench\r\n", method, path, addr)
	if key != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", key)
	}
	if body != nil {
		fmt.Fprintf(&b, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// benchConns is the number of keep-alive connections a GET load uses.
const benchConns = 4

// load sends n requests spread over conns and returns the elapsed time.
func load(b *testing.B, conns []*client, n int) time.Duration {
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	start := time.Now()
	for i, c := range conns {
		share := n / len(conns)
		if i < n%len(conns) {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range share {
				if _, err := c.do(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return d
}

// compareGET loads the device and the bare replay of its answer in alternating rounds.
func compareGET(b *testing.B, path, key string) {
	s := newStack(b)
	devAddr := serve(b, s.srv)
	first, err := dial(b, devAddr, request(http.MethodGet, devAddr, path, key, nil)).do()
	if err != nil {
		b.Fatal(err)
	}
	bareAddr := serve(b, bare(first))
	var dev, anc []*client
	for range benchConns {
		dev = append(dev, dial(b, devAddr, request(http.MethodGet, devAddr, path, key, nil)))
		anc = append(anc, dial(b, bareAddr, request(http.MethodGet, bareAddr, path, key, nil)))
	}
	// Warm both sides up (connections, buffers, the config document cache).
	load(b, dev, 200)
	load(b, anc, 200)
	b.ReportAllocs()
	b.ResetTimer()
	const round = 500
	var devT, ancT time.Duration
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		if (done/round)%2 == 0 {
			devT += load(b, dev, n)
			ancT += load(b, anc, n)
		} else {
			ancT += load(b, anc, n)
			devT += load(b, dev, n)
		}
	}
	b.StopTimer()
	devRPS := float64(b.N) / devT.Seconds()
	ancRPS := float64(b.N) / ancT.Seconds()
	b.ReportMetric(devRPS, "device-req/s")
	b.ReportMetric(ancRPS, "bare-req/s")
	b.ReportMetric(devRPS/ancRPS, "ratio")
}

// BenchmarkPing is the figure http.ping: GET /api/v1/system/ping (public).
func BenchmarkPing(b *testing.B) { compareGET(b, httpd.Prefix+"/system/ping", "") }

// BenchmarkConfigGet is the figure http.config_get: GET /api/v1/config with the API key.
func BenchmarkConfigGet(b *testing.B) { compareGET(b, httpd.Prefix+"/config", benchKey) }

// BenchmarkPutConfig is the figure http.put_config_p50: sequential PUT /api/v1/config writes
// that each change sk.batch_ms (so each is a real durable write), interleaved with one raw
// write + fsync of a record of the same size appended to a file in the same folder.
func BenchmarkPutConfig(b *testing.B) {
	s := newStack(b)
	devAddr := serve(b, s.srv)
	f, err := os.OpenFile(filepath.Join(s.dir, "fsync-anchor.dat"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	var reqs [][]byte
	for v := 101; v <= 200; v++ {
		reqs = append(reqs, request(http.MethodPut, devAddr, httpd.Prefix+"/config", benchKey,
			[]byte(`{"sk":{"batch_ms":`+strconv.Itoa(v)+`}}`)))
	}
	c := dial(b, devAddr, nil)
	record := bytes.Repeat([]byte("x"), 64)
	put := func(i int) time.Duration {
		c.req = reqs[i%len(reqs)]
		start := time.Now()
		a, err := c.do()
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if !bytes.Contains(a.body, []byte(`"sk.batch_ms"`)) {
			b.Fatalf("PUT changed nothing: %s", a.body)
		}
		return d
	}
	raw := func() time.Duration {
		start := time.Now()
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := range 10 {
		put(i)
		raw()
	}
	b.ReportAllocs()
	b.ResetTimer()
	devT := make([]time.Duration, 0, b.N)
	rawT := make([]time.Duration, 0, b.N)
	for i := range b.N {
		if i%2 == 0 {
			devT = append(devT, put(i))
			rawT = append(rawT, raw())
		} else {
			rawT = append(rawT, raw())
			devT = append(devT, put(i))
		}
	}
	b.StopTimer()
	dp, rp := median(devT), median(rawT)
	b.ReportMetric(float64(dp.Microseconds()), "device-p50-µs")
	b.ReportMetric(float64(rp.Microseconds()), "fsync-p50-µs")
	b.ReportMetric(float64(dp)/float64(rp), "ratio")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// discardWriter is the cheapest ResponseWriter, for the handler-only benchmarks.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

// The deadline setters net/http's writer has, so the chain takes the same path as in service.
func (w *discardWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *discardWriter) SetWriteDeadline(time.Time) error { return nil }

// handlerOnly runs the server's handler for one request without any network, to show the
// work (and allocations) the device adds over net/http's own.
func handlerOnly(b *testing.B, path, key string) {
	s := newStack(b)
	r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Host = "127.0.0.1:8080"
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clear(w.h)
		s.srv.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("PUT answered %d", w.status)
		}
	}
}

// BenchmarkPingHandler is GET /api/v1/system/ping through the device's handler alone.
func BenchmarkPingHandler(b *testing.B) { handlerOnly(b, httpd.Prefix+"/system/ping", "") }

// BenchmarkConfigGetHandler is GET /api/v1/config through the device's handler alone.
func BenchmarkConfigGetHandler(b *testing.B) { handlerOnly(b, httpd.Prefix+"/config", benchKey) }

// BenchmarkPutConfigHandler is PUT /api/v1/config through the device's handler alone: each
// write is durable (fsynced) as in service; under callgrind it counts the work around the
// write, which the kernel's fsync does not blur.
func BenchmarkPutConfigHandler(b *testing.B) {
	s := newStack(b)
	var bodies [][]byte
	for v := 101; v <= 200; v++ {
		bodies = append(bodies, []byte(`{"sk":{"batch_ms":`+strconv.Itoa(v)+`}}`))
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		body := bodies[i%len(bodies)]
		r, err := http.NewRequest(http.MethodPut, "http://127.0.0.1"+httpd.Prefix+"/config", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r.Host = "127.0.0.1:8080"
		r.Header.Set("Authorization", "Bearer "+benchKey)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		clear(w.h)
		s.srv.ServeHTTP(w, r)
		if w.status != http.StatusOK {
			b.Fatalf("PUT answered %d", w.status)
		}
	}
}
