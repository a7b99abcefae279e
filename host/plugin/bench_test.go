package plugin

import (
	"bufio"
	"context"
	"crypto/rsa"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"devhost/abi"
	"devhost/host/httpd"
	"devhost/host/plugin/wasmbin"
	"devhost/host/sk"
)

// The benchmarks drive one plugin instance directly (no supervisor goroutine in between), so
// they measure the crossing itself: encoding, the export call, the plugin's decoding and its
// host calls.

type direct struct {
	m *Manager
	p *plugin
	s *session
}

func startDirect(b *testing.B, m *Manager, man abi.Manifest, module []byte) *direct {
	b.Helper()
	d, stop := openDirect(b, m, man, module)
	b.Cleanup(stop)
	return d
}

// openDirect starts one instance of module as the plugin man and answers it with the function
// that ends it again.
func openDirect(b *testing.B, m *Manager, man abi.Manifest, module []byte) (*direct, func()) {
	b.Helper()
	p := m.newPlugin(record{ID: man.ID, Wanted: WantRunning, Granted: capStrings(man.Capabilities)})
	p.man = man
	cp, key, err := m.eng.acquire(context.Background(), module)
	if err != nil {
		b.Fatal(err)
	}
	inst, err := m.eng.instantiate(context.Background(), cp, m.wallTime, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	s := newSession(p, inst, p.inbox.open(), p.rec.Granted)
	p.sess = s
	if err := p.init(context.Background(), s); err != nil {
		b.Fatal(err)
	}
	return &direct{m: m, p: p, s: s}, func() {
		inst.close()
		s.end()
		p.inbox.close()
		m.eng.release(key)
	}
}

func (d *direct) deliver(b *testing.B) {
	if err := d.p.deliver(context.Background(), d.s); err != nil {
		b.Fatal(err)
	}
}

// countingSK counts values without keeping them.
type countingSK struct {
	fakeSK
	n atomic.Int64
}

func (c *countingSK) Publish(vs ...sk.Value) error { c.n.Add(int64(len(vs))); return nil }

func benchManager(b *testing.B, sk SignalK) *Manager {
	b.Helper()
	m, err := New(Options{Dir: b.TempDir(), CacheDir: sharedCache, SignalK: sk,
		TrustedKeys: []*rsa.PublicKey{&loadKey(b, "publisher").PublicKey}})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkDeliver is host→plugin event delivery per value: deltas queued for a subscribed
// plugin, one value per call ("single") or 100 values per call ("batch100").
func BenchmarkDeliver(b *testing.B) {
	for _, per := range []int{1, 100} {
		name := "single"
		if per > 1 {
			name = "batch" + strconv.Itoa(per)
		}
		b.Run(name, func(b *testing.B) {
			m := benchManager(b, newFakeSK())
			d := startDirect(b, m, manifest("good", abi.CapSKSubscribe), testModule(b))
			rec := abi.AppendValue(nil, "environment.wind.speedApparent", abi.Number(7.5))
			b.ResetTimer()
			for done := 0; done < b.N; {
				k := min(per, b.N-done)
				for j := 0; j < k; j++ {
					d.p.inbox.push(d.s.gen, queued{kind: abi.EvDelta, payload: append([]byte(nil), rec...), n: 1})
				}
				d.deliver(b)
				done += k
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/value")
		})
	}
}

// BenchmarkPublish is plugin→host publishing per value, with the SDK's bench plugin: one
// request makes it publish n values within one call (the SDK sends them in one sk_publish).
// "single" is one value per call, "batch100" 100 values per call. The plugin publishes one
// fixed path with sdk.PublishNumber, as a plugin serving a sensor or a switch bank does (its
// paths are constants or built once), so the figure holds no per-value path formatting.
//
// "nolimit" is the same with code compiled without fuel (a comparison only: the host always
// compiles with it, or a runaway plugin could never be stopped). cpu-ns/value is the CPU
// time of the whole process per value, steadier than wall time on a loaded machine.
func BenchmarkPublish(b *testing.B) {
	mod, man := guestModule(b, "bench")
	for _, c := range []struct {
		n       int
		nolimit bool
	}{{1, false}, {100, false}, {100, true}} {
		name := "single"
		if c.n > 1 {
			name = "batch" + strconv.Itoa(c.n)
		}
		if c.nolimit {
			name += "-nolimit"
		}
		n := c.n
		b.Run(name, func(b *testing.B) {
			sk := &countingSK{fakeSK: *newFakeSK()}
			m := benchManager(b, sk)
			if c.nolimit {
				m.eng = unboundedEngine(b)
			}
			d := startDirect(b, m, man, mod)
			b.ResetTimer()
			cpu := startCPU(b)
			for done := 0; done < b.N; {
				k := min(n, b.N-done)
				req := &httpReq{id: d.p.nextHTTP.Add(1), reply: make(chan abi.HTTPResponse, 1)}
				payload := abi.AppendHTTPRequest(nil, abi.HTTPRequest{ID: req.id, Method: "GET", Route: "/bench/publish",
					Path: "/bench/publish", Query: "n=" + strconv.Itoa(k)})
				d.p.inbox.push(d.s.gen, queued{kind: abi.EvHTTP, payload: payload, http: req})
				d.deliver(b)
				if r := <-req.reply; r.Status != 200 {
					b.Fatalf("bench answered %d %s", r.Status, r.Body)
				}
				done += k
			}
			cpu.report(b, "cpu-ns/value")
			if sk.n.Load() != int64(b.N) {
				b.Fatalf("published %d, want %d", sk.n.Load(), b.N)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/value")
		})
	}
}

// BenchmarkPublishDecode is the host's side of sk_publish alone, per value: decoding a
// message of 100 numbers at one path (as BenchmarkPublish's plugin sends) into the client's
// values and handing them over, without the plugin or wazero around it.
func BenchmarkPublishDecode(b *testing.B) {
	var msg []byte
	for i := range 100 {
		msg = abi.AppendNumber(msg, "electrical.batteries.house.voltage", 12+float64(i)/100)
	}
	sk := &countingSK{fakeSK: *newFakeSK()}
	var p publisher
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	for range b.N {
		out, err := p.decode(msg)
		if err != nil {
			b.Fatal(err)
		}
		_ = sk.Publish(out...)
		p.release()
	}
	cpu.report(b, "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/value")
}

// unboundedEngine compiles without fuel, into a cache of its own.
func unboundedEngine(b *testing.B) *engine {
	e, err := newEngine(filepath.Join(tmpRoot, "cache-unbounded"), DefaultMemoryPages, DefaultStackBytes, hostFunctions())
	if err != nil {
		b.Fatal(err)
	}
	e.unbounded = true
	return e
}

// BenchmarkABIBytes is bytes per second through the ABI into the plugin: batches of 64 KiB
// string values.
func BenchmarkABIBytes(b *testing.B) {
	m := benchManager(b, newFakeSK())
	d := startDirect(b, m, manifest("good", abi.CapSKSubscribe), testModule(b))
	rec := abi.AppendValue(nil, "environment.text", abi.String(strings.Repeat("x", 4000)))
	const per = 16
	b.SetBytes(int64(len(rec) * per))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < per; j++ {
			d.p.inbox.push(d.s.gen, queued{kind: abi.EvDelta, payload: append([]byte(nil), rec...), n: 1})
		}
		d.deliver(b)
	}
}

// BenchmarkStart is a plugin start: load the compiled code, instantiate, run _initialize
// and dev_init. Three cases, in the order a device meets them:
//
//   - install: an empty compilation cache, so the module is compiled (as at install);
//   - boot: a new Manager over a cache directory filled before, as the first start after a
//     reboot (devbench's plugin.cold_start);
//   - restart: the same Manager starting the plugin again after it stopped (its compiled code
//     released, as a stop releases it), the warm start plugin.cold_start is compared with.
//
// cpu-ms/op is the process's CPU time per start; path-ms/op (Linux) the CPU time of the
// goroutine that starts the plugin, pinned to its thread: the start's critical path, without
// the work other goroutines do beside it on the second core (the collector's workers, the
// heap handed back after the compilation) and without the time it waits for that work.
func BenchmarkStart(b *testing.B) {
	mod := testModule(b)
	fill := func(b *testing.B) string {
		dir := b.TempDir()
		m, err := New(Options{Dir: b.TempDir(), CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		cp, key, err := m.eng.acquire(context.Background(), mod)
		if err != nil || cp == nil {
			b.Fatal(err)
		}
		m.eng.release(key)
		return dir
	}
	for _, name := range []string{"install", "boot", "restart"} {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var cache string
			var m *Manager
			if name != "install" {
				cache = fill(b)
			}
			if name == "restart" {
				var err error
				if m, err = New(Options{Dir: b.TempDir(), CacheDir: cache}); err != nil {
					b.Fatal(err)
				}
				startStop(b, m, mod) // the first start after boot is not a restart
			}
			b.ResetTimer()
			var cpu, path time.Duration
			_, pathOK := threadCPU()
			for i := 0; i < b.N; i++ {
				if name != "restart" {
					b.StopTimer()
					dir := cache
					if name == "install" {
						dir = b.TempDir()
					}
					var err error
					if m, err = New(Options{Dir: b.TempDir(), CacheDir: dir}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				c := startCPU(b)
				t0, _ := threadCPU()
				startStop(b, m, mod)
				t1, _ := threadCPU()
				cpu += processCPU(b) - c.start
				path += t1 - t0
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			if pathOK {
				b.ReportMetric(float64(path.Microseconds())/1000/float64(b.N), "path-ms/op")
			}
		})
	}
}

// startStop starts the module as plugin "good" on m, runs its init, and stops it again,
// releasing its compiled code as a stopped plugin does.
func startStop(b *testing.B, m *Manager, module []byte) {
	b.Helper()
	_, stop := openDirect(b, m, manifest("good"), module)
	stop()
}

// rssBytes reads the process's resident set.
func rssBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc: RSS not measurable here")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Skip("VmRSS not found")
	return 0
}

// distinctModule makes a module with its own hash (so its own compiled code) by appending a
// custom section named after tag. The section carries one byte of content after its name:
// wazero (with DWARF on, its default) reads a custom section that ends right after its name
// as a truncated one and refuses the module.
func distinctModule(mod []byte, tag string) []byte {
	body := append(wasmbin.AppendName(nil, "devhost.bench"+tag), 0)
	return wasmbin.AppendSection(append([]byte(nil), mod...), 0, body)
}

// warmModules answers n modules, all mod or (distinct) distinct copies of it, each compiled
// into m's cache first: the figures are the running cost, not the compiler's.
func warmModules(b *testing.B, m *Manager, mod []byte, n int, distinct bool) [][]byte {
	b.Helper()
	mods := make([][]byte, n)
	for i := range mods {
		mods[i] = mod
		if distinct {
			mods[i] = distinctModule(mod, strconv.Itoa(i))
		}
		cp, key, err := m.eng.acquire(context.Background(), mods[i])
		if err != nil || cp == nil {
			b.Fatalf("warming the compilation cache: %v", err)
		}
		m.eng.release(key)
	}
	return mods
}

// BenchmarkRSSPerPlugin is the resident memory each further running plugin adds, for
// plugins built from distinct modules (each with its own compiled code) and from one module.
func BenchmarkRSSPerPlugin(b *testing.B) {
	mod := testModule(b)
	for _, distinct := range []bool{true, false} {
		name := "same-module"
		if distinct {
			name = "distinct-modules"
		}
		b.Run(name, func(b *testing.B) {
			const n = 8
			m := benchManager(b, newFakeSK())
			mods := warmModules(b, m, mod, n+1, distinct)
			var per float64
			for i := 0; i < b.N; i++ {
				startDirect(b, m, manifest("p0"), mods[0]) // the first plugin pays the shared runtime
				runtime.GC()
				before := rssBytes(b)
				for j := 1; j <= n; j++ {
					startDirect(b, m, manifest(fmt.Sprintf("p%d", j)), mods[j])
				}
				runtime.GC()
				per = float64(rssBytes(b)-before) / n
			}
			b.ReportMetric(per/(1<<20), "MiB/plugin")
		})
	}
}

// BenchmarkRawWazero is the anchor: the same module on bare wazero, one dev_event call with
// an empty batch (event_read answers 0), beside the host's cost for the same call.
func BenchmarkRawWazero(b *testing.B) {
	mod := testModule(b)
	b.Run("wazero", func(b *testing.B) {
		ctx := context.Background()
		rt := rawRuntime(ctx, b, mustCache(b))
		defer rt.Close(ctx)
		inst, err := rt.InstantiateWithConfig(ctx, mod, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
		if err != nil {
			b.Fatal(err)
		}
		fn := inst.ExportedFunction(abi.ExportEvent)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := fn.Call(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("host", func(b *testing.B) {
		m := benchManager(b, newFakeSK())
		d := startDirect(b, m, manifest("good"), mod)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := d.s.call(context.Background(), abi.ExportEvent, nil, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func mustCache(b *testing.B) wazero.CompilationCache {
	c, err := wazero.NewCompilationCacheWithDir(filepath.Join(tmpRoot, "raw-cache"))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkHTTPWhileSpinning is the host's own HTTP throughput (GET /plugins) with no plugin
// busy and while a plugin spins into its time limit again and again. plugin-cores is the CPU
// the plugin's worker threads got per second of the run (Linux): what the plugin took from
// the API, the figure to compare on a machine where other load scatters the throughput.
// httpSpinClients is how many clients BenchmarkHTTPWhileSpinning runs at once, each on a
// keep-alive connection of its own.
const httpSpinClients = 4

func BenchmarkHTTPWhileSpinning(b *testing.B) {
	for _, spin := range []bool{false, true} {
		name := "idle"
		if spin {
			name = "spinning"
		}
		b.Run(name, func(b *testing.B) {
			srv := httpd.New(httpd.Options{})
			m, err := New(Options{Dir: b.TempDir(), CacheDir: sharedCache, Router: srv,
				TrustedKeys: []*rsa.PublicKey{&loadKey(b, "publisher").PublicKey},
				CallTimeout: 100 * time.Millisecond, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond,
				MaxFailures: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.HandleAll(m.Routes()); err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); _ = m.Run(ctx) }()
			defer func() { cancel(); wg.Wait() }()
			if spin {
				if _, err := m.Install(pack(b, manifest("spin", abi.CapHTTP), loadKey(b, "publisher")), nil); err != nil {
					b.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						if resp, err := ts.Client().Get(ts.URL + "/api/v1/spin/x"); err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
						time.Sleep(time.Millisecond)
					}
				}()
				deadline := time.Now().Add(30 * time.Second)
				for {
					st, _ := m.Status("spin")
					if st.Restarts > 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			// A keep-alive connection for every client, as a load generator keeps them:
			// net/http keeps two idle connections per host unless told otherwise.
			tr := ts.Client().Transport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 64
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			b.ResetTimer()
			plugin0, _ := niceCPU()
			cpu := startCPU(b)
			st0, _ := m.Status("spin")
			// A fixed number of clients in both cases: RunParallel starts one per GOMAXPROCS
			// slot, and the spinning call's lent slot (procs.go) gave the spinning case three
			// clients against the idle case's two.
			var (
				next    atomic.Int64
				clients sync.WaitGroup
			)
			for range httpSpinClients {
				clients.Go(func() {
					for next.Add(1) <= int64(b.N) {
						resp, err := client.Get(ts.URL + "/api/v1/plugins")
						if err != nil {
							b.Error(err)
							return
						}
						// Read to the end: net/http reuses a connection only once its
						// answer was read whole, and closing it unread made every request
						// dial, accept and close a connection of its own (as many
						// connects as requests under strace), which cost more than the
						// request.
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							b.Errorf("GET /plugins: %d", resp.StatusCode)
						}
					}
				})
			}
			clients.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
			// The process's CPU per request, the plugin's included: the clients run in this
			// process too, so while it is CPU-bound req/s follows its inverse, and unlike
			// req/s it does not move with the other load of a shared machine.
			cpu.report(b, "cpu-ns/req")
			if st1, _ := m.Status("spin"); spin {
				b.ReportMetric(float64(st1.Restarts-st0.Restarts)/b.Elapsed().Seconds(), "restarts/s")
			}
			if plugin1, ok := niceCPU(); ok {
				// The share of a core the plugin's worker got while the API was loaded.
				b.ReportMetric(float64(plugin1-plugin0)/float64(b.Elapsed()), "plugin-cores")
			}
		})
	}
}

// rawRuntime is a bare wazero runtime with WASI and every host function of the ABI answering 0:
// the plugin runtime's floor, without the host's work behind each call.
func rawRuntime(ctx context.Context, b *testing.B, cache wazero.CompilationCache) wazero.Runtime {
	b.Helper()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	hb := rt.NewHostModuleBuilder(abi.Module)
	for name, sig := range abi.Signatures {
		ps := make([]api.ValueType, len(sig.Params))
		for i, p := range sig.Params {
			ps[i] = api.ValueType(p)
		}
		hb.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, st []uint64) {
			st[0] = 0
		}), ps, []api.ValueType{api.ValueTypeI32}).Export(name)
	}
	if _, err := hb.Instantiate(ctx); err != nil {
		b.Fatal(err)
	}
	return rt
}
