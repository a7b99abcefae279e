package plugin

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"devhost/plugins"
)

// The memory benchmarks measure what running plugins cost the device: resident memory (VmRSS
// of this process) and the host's Go heap with 0, 1 and 5 plugins running, each plugin from a
// module of its own (distinct plugins have distinct code, compiled and mapped once each). The
// compilation cache on disk is warmed first, so the figures are the running cost, not the
// compiler's: the code a plugin runs is read from the cache when it starts, as after a
// reboot, and counts. Nothing compiled may stay in memory from the warming, on either side:
// code resident before the reading with 0 plugins would fall out of every difference.
// code-MiB/plugin is the compiled code's share (anonymous executable mappings). A
// measurement takes seconds and would only pile up plugins if repeated, so it is made once
// per sub-benchmark and reported for every b.N the framework asks for.

// memPoints are the plugin counts measured.
var memPoints = []int{0, 1, 5}

// memFigures are the readings at memPoints, in bytes.
type memFigures struct {
	rss, heap, code [3]int64 // at memPoints
	wasmBytes       int
	// shared: every plugin is an instance of one module, whose code and decoded module the
	// first one brings; the per-plugin figures are then what each further instance adds.
	shared bool
}

// report reports the per-plugin figures: the differences to 0 plugins (to 1 when shared)
// per plugin started since, and the first plugin's cost.
func (f memFigures) report(b *testing.B) {
	b.ReportMetric(0, "ns/op") // the time of a loop over a cached figure means nothing
	last, from := len(memPoints)-1, 0
	if f.shared {
		from = 1
	}
	n := float64(memPoints[last] - memPoints[from])
	b.ReportMetric(float64(f.rss[last]-f.rss[from])/n/(1<<20), "MiB/plugin")
	b.ReportMetric(float64(f.rss[1]-f.rss[0])/(1<<20), "MiB-first")
	b.ReportMetric(float64(f.heap[last]-f.heap[from])/n/(1<<20), "heap-MiB/plugin")
	b.ReportMetric(float64(f.code[last]-f.code[from])/n/(1<<20), "code-MiB/plugin")
	b.ReportMetric(float64(f.wasmBytes)/(1<<10), "KiB-module")
}

// processRSS reads VmRSS of this process.
func processRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("resident memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("resident memory %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("resident memory: no VmRSS line")
}

// codeRSS sums the resident memory of this process's anonymous executable mappings: the
// code wazero compiled or read from its cache (the executable's own code is file-backed).
func codeRSS() (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("compiled code: %w", err)
	}
	defer f.Close()
	var sum int64
	code := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 5 && strings.Contains(fs[0], "-") && len(fs[1]) == 4 {
			// A mapping's header: range, permissions, offset, device, inode[, path].
			code = len(fs) == 5 && fs[1][2] == 'x'
			continue
		}
		if code && len(fs) == 3 && fs[0] == "Rss:" {
			kb, err := strconv.ParseInt(fs[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("compiled code %q: %w", sc.Text(), err)
			}
			sum += kb << 10
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("compiled code: %w", err)
	}
	return sum, nil
}

// memReading is one reading of settle.
type memReading struct{ rss, heap, code int64 }

// settle collects garbage and returns freed memory, so that the next reading holds what is
// alive, then reads RSS, the Go heap in use and the compiled code's share of RSS.
func settle(b *testing.B) memReading {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	rss, err := processRSS()
	if err != nil {
		b.Skip(err)
	}
	code, err := codeRSS()
	if err != nil {
		b.Skip(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memReading{rss: rss, heap: int64(ms.HeapInuse), code: code}
}

// record keeps reading r as the figures at memPoints[i].
func (f *memFigures) record(i int, r memReading) {
	f.rss[i], f.heap[i], f.code[i] = r.rss, r.heap, r.code
}

// memVariant is the minimal plugin (plugins/testdata/minimal) built one way.
type memVariant struct {
	name    string
	tags    string
	ldflags string
}

var (
	memModsOnce sync.Once
	memMods     map[string][]byte
	memModsErr  error
)

// memVariants are the levers sdk/README.md names, each beside the plain build.
var memVariants = []memVariant{
	{name: "minimal"},
	{name: "stripped", ldflags: "-s -w"},
	{name: "idle64", tags: "idle64"},
	{name: "churn", tags: "churn"},
	{name: "churn-lowgc", tags: "churn lowgc"},
	{name: "churn-memlimit", tags: "churn memlimit"},
}

// minimalModule builds (once per run) every variant of the minimal plugin.
func minimalModule(b *testing.B, variant string) []byte {
	b.Helper()
	memModsOnce.Do(func() {
		memMods = map[string][]byte{}
		for _, v := range memVariants {
			out := filepath.Join(tmpRoot, "minimal-"+v.name+".wasm")
			args := []string{"build", "-buildmode=c-shared", "-o", out}
			if v.tags != "" {
				args = append(args, "-tags", v.tags)
			}
			if v.ldflags != "" {
				args = append(args, "-ldflags", v.ldflags)
			}
			cmd := exec.Command("go", append(args, "./testdata/minimal")...)
			cmd.Dir = plugins.Dir()
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if outb, err := cmd.CombinedOutput(); err != nil {
				memModsErr = fmt.Errorf("building the minimal plugin (%s): %w\n%s", v.name, err, outb)
				return
			}
			mod, err := os.ReadFile(out)
			if err != nil {
				memModsErr = err
				return
			}
			memMods[v.name] = mod
		}
	})
	if memModsErr != nil {
		b.Fatal(memModsErr)
	}
	return memMods[variant]
}

// hostPluginMemory starts plugins on the plugin host and measures: from distinct copies of mod
// (distinct plugins), or all from mod itself (one plugin's instances: the code is shared and
// only the instance's own memory counts).
func hostPluginMemory(b *testing.B, mod []byte, distinct bool) memFigures {
	b.Helper()
	m := benchManager(b, newFakeSK())
	mods := warmModules(b, m, mod, memPoints[len(memPoints)-1], distinct)
	f := memFigures{wasmBytes: len(mod), shared: !distinct}
	started := 0
	for i, n := range memPoints {
		for ; started < n; started++ {
			startDirect(b, m, manifest(fmt.Sprintf("m%d", started)), mods[started])
		}
		f.record(i, settle(b))
	}
	return f
}

// wazeroPluginMemory is the baseline: the same modules instantiated on bare wazero (WASI,
// every devhost host function answering 0, _initialize run), with a compilation cache warmed
// the same way.
func wazeroPluginMemory(b *testing.B, mod []byte) memFigures {
	b.Helper()
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(tmpRoot, "mem-wazero-cache"))
	if err != nil {
		b.Fatal(err)
	}
	last := memPoints[len(memPoints)-1]
	mods := make([][]byte, last)
	warm := rawRuntime(ctx, b, cache)
	for i := range mods {
		mods[i] = distinctModule(mod, "w"+strconv.Itoa(i))
		if _, err := warm.CompileModule(ctx, mods[i]); err != nil {
			b.Fatal(err)
		}
	}
	// A runtime's close leaves its compiled modules in the cache's engine: closing the cache
	// too leaves the code on disk alone, as the host's warming (acquire, release) does.
	if err := warm.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if err := cache.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if cache, err = wazero.NewCompilationCacheWithDir(filepath.Join(tmpRoot, "mem-wazero-cache")); err != nil {
		b.Fatal(err)
	}
	rt := rawRuntime(ctx, b, cache)
	b.Cleanup(func() {
		_ = rt.Close(ctx)
		_ = cache.Close(ctx)
	})
	f := memFigures{wasmBytes: len(mod)}
	started := 0
	for i, n := range memPoints {
		for ; started < n; started++ {
			cm, err := rt.CompileModule(ctx, mods[started])
			if err != nil {
				b.Fatal(err)
			}
			cfg := wazero.NewModuleConfig().WithName(fmt.Sprintf("w%d", started)).WithStartFunctions("_initialize")
			if _, err := rt.InstantiateModule(ctx, cm, cfg); err != nil {
				b.Fatal(err)
			}
		}
		f.record(i, settle(b))
	}
	return f
}

// BenchmarkMinimalPluginRSS is plugin.rss_per_plugin: what each running minimal plugin adds
// on the plugin host ("host") beside the same module on bare wazero ("wazero").
func BenchmarkMinimalPluginRSS(b *testing.B) {
	for _, side := range []struct {
		name    string
		measure func(*testing.B, []byte) memFigures
	}{{"host", func(b *testing.B, mod []byte) memFigures { return hostPluginMemory(b, mod, true) }}, {"wazero", wazeroPluginMemory}} {
		var once sync.Once
		var f memFigures
		b.Run(side.name, func(b *testing.B) {
			once.Do(func() { f = side.measure(b, minimalModule(b, "minimal")) })
			for range b.N {
			}
			f.report(b)
		})
	}
}

// BenchmarkPluginMemoryLevers is each lever of sdk/README.md on the plugin host: the minimal
// plugin built plain, stripped, with 64 idle goroutines, and making garbage at start with the
// collector's defaults, a 25 % GC target or an 8 MiB soft limit. Five instances of one module
// each: the code is mapped once, with the first (MiB-first holds it), so MiB/plugin, what each
// further instance adds, is what an instance holds (its linear memory above all) and
// KiB-module the module's size, which sets the code's share.
func BenchmarkPluginMemoryLevers(b *testing.B) {
	for _, v := range memVariants {
		var once sync.Once
		var f memFigures
		b.Run(v.name, func(b *testing.B) {
			once.Do(func() { f = hostPluginMemory(b, minimalModule(b, v.name), false) })
			for range b.N {
			}
			f.report(b)
		})
	}
}
