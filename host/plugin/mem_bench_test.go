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
// compilation cache is warmed first, so the figures are the running cost, not the
// compiler's. A measurement takes seconds and would only pile up plugins if repeated, so it
// is made once per sub-benchmark and reported for every b.N the framework asks for.

// memPoints are the plugin counts measured.
var memPoints = []int{0, 1, 5}

// memFigures are the differences to 0 plugins, in bytes.
type memFigures struct {
	rss, heap [3]int64 // at memPoints
	wasmBytes int
}

func (f memFigures) report(b *testing.B) {
	b.ReportMetric(0, "ns/op") // the time of a loop over a cached figure means nothing
	last := len(memPoints) - 1
	n := float64(memPoints[last])
	b.ReportMetric(float64(f.rss[last]-f.rss[0])/n/(1<<20), "MiB/plugin")
	b.ReportMetric(float64(f.rss[1]-f.rss[0])/(1<<20), "MiB-first")
	b.ReportMetric(float64(f.heap[last]-f.heap[0])/n/(1<<20), "heap-MiB/plugin")
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

// settle collects garbage and returns freed memory, so that the next reading holds what is
// alive, then reads RSS and the Go heap in use.
func settle(b *testing.B) (rss, heap int64) {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	rss, err := processRSS()
	if err != nil {
		b.Skip(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return rss, int64(ms.HeapInuse)
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
	f := memFigures{wasmBytes: len(mod)}
	started := 0
	for i, n := range memPoints {
		for ; started < n; started++ {
			startDirect(b, m, manifest(fmt.Sprintf("m%d", started)), mods[started])
		}
		f.rss[i], f.heap[i] = settle(b)
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
	newRuntime := func() wazero.Runtime { return rawRuntime(ctx, b, cache) }
	last := memPoints[len(memPoints)-1]
	mods := make([][]byte, last)
	warm := newRuntime()
	for i := range mods {
		mods[i] = distinctModule(mod, "w"+strconv.Itoa(i))
		if _, err := warm.CompileModule(ctx, mods[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := warm.Close(ctx); err != nil {
		b.Fatal(err)
	}
	rt := newRuntime()
	b.Cleanup(func() { _ = rt.Close(ctx) })
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
		f.rss[i], f.heap[i] = settle(b)
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
// each: the code is compiled and mapped once, so MiB/plugin is what an instance holds (its
// linear memory above all) and KiB-module the module's size, which sets the code's share.
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
