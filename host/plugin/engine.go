package plugin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"devhost/abi"
	"devhost/host/plugin/fuel"
	"devhost/host/plugin/stackguard"
)

// engine compiles plugin modules (through the shared on-disk compilation cache) and starts
// sandboxed instances of them through extism's CompiledPlugin and Plugin; the checks extism
// has no API for go to wazero directly (see the package doc).
type engine struct {
	cacheDir string // where compiled code is kept; "" in memory
	pages    uint32 // linear memory cap per memory, in 64 KiB pages (the cap less the stack)
	stack    uint32 // stack budget per instance, in bytes
	funcs    []extism.HostFunction
	// wasi is the WASI the plugins link against, as a checker's runtime declares it, made at
	// the first check; checks counts the modules compiled for checkLink.
	wasi   map[string]api.FunctionDefinition
	checks int
	// unbounded compiles without the fuel that enforces the time limit. Only the benchmarks
	// set it, for a comparison.
	unbounded bool
	// compiling serialises compilations: they are CPU-bound and the host must keep answering.
	// A one-slot semaphore, so that waiting for it gives way to a cancelled context; the
	// goroutine that compiles holds it (see acquire) until the compilation ends.
	compiling chan struct{}
	// compileHook and abandonHook, when set by a test, run on the compiling goroutine before
	// it compiles and after it closed what an abandoned compilation made.
	compileHook, abandonHook func()
	// reclaim hands the heap back to the OS after each compilation, beside the start.
	reclaim reclaimer

	mu       sync.Mutex
	compiled map[string]*shared // by SHA-256 of the module
}

// compiled is a module compiled by extism in a runtime of its own, with WASI and the host
// functions instantiated in that runtime for its instances to link against.
type compiled struct {
	cp *extism.CompiledPlugin
	// cache is the module's own compilation cache (over the shared directory): extism's
	// Close closes its runtime, and a runtime with a cache leaves the compiled code in the
	// cache's engine (wazero closes compiled modules there only one by one, and extism keeps
	// its compiled module to itself). Closing the cache too is what frees the code.
	cache wazero.CompilationCache
}

// close releases the compiled module: its runtime, then its code.
func (c *compiled) close(ctx context.Context) {
	_ = c.cp.Close(ctx)
	_ = c.cache.Close(ctx)
}

// shared is a compiled module and how many plugins use it: plugins built from the same
// module bytes share its code.
type shared struct {
	c    *compiled
	refs int
}

// hostFn is one host function of the ABI.
type hostFn struct {
	name            string
	fn              api.GoFunc
	params, results []api.ValueType
}

// newEngine prepares the engine. capPages caps the memory of one instance: its linear memory
// and its Wasm stack (stack bytes, rounded up to whole pages) together.
func newEngine(cacheDir string, capPages, stack uint32, funcs []hostFn) (*engine, error) {
	stackPages := (stack + 65535) / 65536
	if stack == 0 || capPages <= stackPages {
		return nil, fmt.Errorf("plugin: a memory cap of %d pages leaves no linear memory beside a %d byte stack", capPages, stack)
	}
	code := ""
	if cacheDir != "" {
		code = codeCacheDir(cacheDir)
		if err := os.MkdirAll(code, 0o755); err != nil {
			return nil, fmt.Errorf("plugin: compilation cache: %w", err)
		}
	}
	hf := make([]extism.HostFunction, 0, len(funcs))
	for _, f := range funcs {
		body := f.fn
		h := extism.NewHostFunctionWithStack(f.name, func(ctx context.Context, _ *extism.CurrentPlugin, st []uint64) {
			body(ctx, st)
		}, f.params, f.results)
		h.SetNamespace(abi.Module)
		hf = append(hf, h)
	}
	r := extism.NewHostFunctionWithStack(fuel.Import, func(ctx context.Context, _ *extism.CurrentPlugin, st []uint64) {
		refuel(ctx, st)
	}, nil, []api.ValueType{api.ValueTypeI32})
	r.SetNamespace(abi.Module)
	hf = append(hf, r)
	return &engine{cacheDir: code, pages: capPages - stackPages, stack: stack, funcs: hf,
		compiling: make(chan struct{}, 1), compiled: map[string]*shared{}}, nil
}

// moduleCache is a compilation cache of one module's own over the shared directory.
func (e *engine) moduleCache() (wazero.CompilationCache, error) {
	if e.cacheDir == "" {
		return wazero.NewCompilationCache(), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(e.cacheDir)
	if err != nil {
		return nil, fmt.Errorf("plugin: compilation cache: %w", err)
	}
	return c, nil
}

// close releases what is still compiled.
func (e *engine) close(ctx context.Context) {
	e.reclaim.wait()
	e.mu.Lock()
	left := e.compiled
	e.compiled = map[string]*shared{}
	e.mu.Unlock()
	for _, s := range left {
		s.c.close(ctx)
	}
}

// codeCacheDir is where compiled code is kept under the cache directory. Code compiled
// before fuel (with wazero's termination checks, kept in the cache directory itself) is never
// loaded again, wazero never evicts a file of its cache, and a device's flash is small: the
// old copy is removed, and the code lives in a directory of its own.
func codeCacheDir(dir string) string {
	if old, err := filepath.Glob(filepath.Join(dir, "wazero-*")); err == nil {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	code := filepath.Join(dir, "fuel")
	pruneInstrumented(code)
	return code
}

// refuel is the host side of package fuel: called by a plugin's code whenever its allowance
// is spent, it ends the call (a trap, with the exit code callError names) once the call has
// run its time limit or was stopped, holds the call back while it is to give way to the API
// (throttle.go), and answers the next allowance otherwise. A module's start function runs
// before there is a session: it is limited by its context's deadline, which is also compared
// with the clock, so that the limit is kept even while the timer that would end the context
// waits for a free thread.
func refuel(ctx context.Context, st []uint64) {
	if s, _ := ctx.Value(sessionKey{}).(*session); s != nil && s.meter != nil {
		if err := s.meter.check(ctx); err != nil {
			trap(err)
		}
		st[0] = fuel.Fuel
		return
	}
	if err := ctx.Err(); err != nil {
		trap(err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		trap(context.DeadlineExceeded)
	}
	st[0] = fuel.Fuel
}

// trap ends the plugin's call with the exit code callError names for err.
func trap(err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
	}
	panic(sys.NewExitError(sys.ExitCodeContextCanceled))
}

// permanentError marks a failure that retrying cannot fix (a bad bundle, a module that does
// not compile or link): the plugin is disabled at once instead of restarted.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

func permanent(err error) error { return permanentError{err} }

func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// acquire returns the compiled form of a module, compiling it unless a plugin already uses
// it; release gives it back.
//
// wazero's compiler takes no cancellation, and a first compilation of a few-MB module takes
// seconds to tens of seconds on a small board. So the compilation runs on a goroutine of its
// own and acquire returns as soon as ctx ends: a stop, a removal or the shutdown of the
// device does not wait for it (the supervisor gives the app 10 s after SIGTERM before it
// kills it), nor does one waiting behind another's compilation. The goroutine keeps the
// compiling slot until its compilation ends, so an abandoned compilation is never run twice at
// once; what it made is closed, the compiled code it wrote into the cache stays for the next
// start.
func (e *engine) acquire(ctx context.Context, module []byte) (*compiled, string, error) {
	sum := sha256.Sum256(module)
	key := hex.EncodeToString(sum[:])
	select {
	case e.compiling <- struct{}{}:
	case <-ctx.Done(): // behind another compilation: a stop does not wait for it either
		return nil, "", fmt.Errorf("compile: %w", ctx.Err())
	}
	e.mu.Lock()
	if s := e.compiled[key]; s != nil {
		s.refs++
		e.mu.Unlock()
		<-e.compiling
		return s.c, key, nil
	}
	e.mu.Unlock()
	type result struct {
		c   *compiled
		err error
	}
	// done is unbuffered: the result is handed over only to an acquire still waiting, and
	// otherwise closed by the goroutine, whatever the order of the end of ctx and the end of
	// the compilation.
	done := make(chan result)
	go func() {
		defer func() { <-e.compiling }()
		if h := e.compileHook; h != nil {
			h()
		}
		c, err := e.compileNow(context.WithoutCancel(ctx), module, key)
		select {
		case done <- result{c, err}:
		case <-ctx.Done():
			if err == nil {
				c.close(context.Background())
			}
			if h := e.abandonHook; h != nil {
				h()
			}
		}
	}()
	select {
	case r := <-done:
		return e.keep(key, r.c, r.err)
	case <-ctx.Done():
		return nil, "", fmt.Errorf("compile: %w", ctx.Err())
	}
}

// compileNow compiles the module and starts handing the compilation's garbage back.
func (e *engine) compileNow(ctx context.Context, module []byte, key string) (*compiled, error) {
	c, err := e.compile(ctx, module, key)
	// wazero's compiler builds its IR on the Go heap: a few megabytes of module take
	// hundreds of megabytes while compiling, all garbage once it returns. The heap goal
	// stays at twice that peak until the next collection, and the scavenger keeps the pages
	// resident while the heap is under its goal: an idle device would hold them for
	// minutes. Collecting now gives them back to the OS at once. Even a compilation served
	// from the cache leaves some 7 MiB resident without it (the module read, wazero's
	// decoding), so it runs after every compilation, on a goroutine of its own: it took a
	// tenth of a cold start, and the instance can be made meanwhile (instantiate waits for
	// it before the plugin runs, so a started plugin has its compilation's garbage gone).
	e.reclaim.start()
	return c, err
}

// keep records a compiled module for the plugins that use it.
func (e *engine) keep(key string, c *compiled, err error) (*compiled, string, error) {
	if err != nil {
		return nil, "", err
	}
	e.mu.Lock()
	e.compiled[key] = &shared{c: c, refs: 1}
	e.mu.Unlock()
	return c, key, nil
}

func (e *engine) release(key string) {
	e.mu.Lock()
	s := e.compiled[key]
	if s == nil {
		e.mu.Unlock()
		return
	}
	s.refs--
	if s.refs > 0 {
		e.mu.Unlock()
		return
	}
	delete(e.compiled, key)
	e.mu.Unlock()
	s.c.close(context.Background())
}

// compile bounds the module's stack and its time (instrument), has extism compile it in a runtime
// of its own that holds the per-memory cap and closes an instance whose context ends (the time
// limits of the start and of every call), then checks that it links against this host; nothing
// of a module is instantiated before it passed the check.
// wazero's compiler takes no cancellation: a compilation is bounded by the bundle size cap.
func (e *engine) compile(ctx context.Context, module []byte, key string) (*compiled, error) {
	guarded, intact, err := e.instrument(module, key)
	if err != nil {
		return nil, err
	}
	c, err := e.compileGuarded(ctx, guarded, intact)
	if errors.Is(err, errDamagedRewrite) {
		// Nothing of it was instantiated or checked: rewrite the module (over the damaged
		// file) and compile that.
		if guarded, err = e.rewrite(module, e.instrumentedPath(key)); err != nil {
			return nil, err
		}
		c, err = e.compileGuarded(ctx, guarded, nil)
	}
	return c, err
}

// errDamagedRewrite: the kept rewrite compiled did not match its checksum.
var errDamagedRewrite = errors.New("plugin: the kept rewrite of the module is damaged")

// compileGuarded compiles the rewritten module and checks it (see compile). intact, unless
// nil, tells once the compilation is done whether guarded is what was kept (instrument).
func (e *engine) compileGuarded(ctx context.Context, guarded []byte, intact func() bool) (*compiled, error) {
	cache, err := e.moduleCache()
	if err != nil {
		return nil, err
	}
	rc := e.runtimeConfig(cache)
	ctx = experimental.WithFunctionListenerFactory(ctx, capture{})
	// extism compiles first and the check follows, before anything is instantiated: the
	// code wazero shares between the two runtimes keeps the decoded module of whichever
	// compiled it first, and the one kept should be extism's, which its compiled plugin
	// holds anyway. Checking first kept the checker's copy (its data segments, function
	// bodies and definitions, some 12 MB for the bundled n2k plugin) beside extism's for as
	// long as the plugin was installed.
	man := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: guarded, Name: "main"}}}
	cp, err := extism.NewCompiledPlugin(ctx, man, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, e.funcs)
	if intact != nil && !intact() {
		if err == nil {
			_ = cp.Close(context.Background())
		}
		_ = cache.Close(context.Background())
		return nil, errDamagedRewrite
	}
	if err != nil {
		_ = cache.Close(context.Background())
		return nil, permanent(fmt.Errorf("compile: %w", err))
	}
	c := &compiled{cp: cp, cache: cache}
	marker := e.linkedMarker(guarded)
	if _, err := os.Stat(marker); marker == "" || err != nil {
		if err := e.check(ctx, rc, guarded); err != nil {
			c.close(context.Background())
			return nil, err
		}
	}
	if marker != "" {
		// Without it the next start checks again: a failure to write costs time, not safety.
		if err := os.MkdirAll(filepath.Dir(marker), 0o755); err == nil {
			_ = os.WriteFile(marker, nil, 0o644)
		}
	}
	return c, nil
}

// linkedMarker names the file that records, beside the compiled code, that a module passed
// checkLink, so that a later start (after a reboot) skips the checker's compilation: wazero
// decodes and validates a module at every compilation, cache hit or not, and the check's was
// about half of a warm start. The name holds the module's SHA-256 under a directory named by
// what the verdict depends on: the host's ABI table and the wazero version (its WASI). ""
// when code is not kept on disk. A file there is trusted as the compiled code next to it is.
func (e *engine) linkedMarker(module []byte) string {
	if e.cacheDir == "" {
		return ""
	}
	sum := sha256.Sum256(module)
	return filepath.Join(e.cacheDir, "linked-"+linkFingerprint(), hex.EncodeToString(sum[:]))
}

// linkFingerprint digests what checkLink's verdict depends on besides the module.
var linkFingerprint = sync.OnceValue(func() string {
	h := sha256.New()
	names := make([]string, 0, len(abi.Signatures))
	for n := range abi.Signatures {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s%v%v;", n, abi.Signatures[n].Params, abi.Signatures[n].Results)
	}
	fmt.Fprintf(h, "%s%s%v;", abi.ExportInit, abi.ExportEvent, abi.ExportSignature.Results)
	fmt.Fprintf(h, "%s;", fuel.Import)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				fmt.Fprintf(h, "%s%s", d.Version, d.Sum)
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
})

// runtimeConfig is the configuration of every runtime: the per-memory cap and the
// compilation cache. wazero's own termination checks stay off: the time limits are enforced
// through the module's fuel (package fuel, refuel), at a fraction of their cost.
func (e *engine) runtimeConfig(cache wazero.CompilationCache) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(e.pages)
}

// check compiles the module for checkLink in a runtime of the module's configuration rc: it
// shares the module's cache, where the code extism compiled just before is found, so the
// check compiles nothing again. extism compiles the module in its own runtime and exposes
// neither the compiled module nor its imports, and an instance's exports only by name: the
// types are wazero's to tell.
func (e *engine) check(ctx context.Context, rc wazero.RuntimeConfig, module []byte) error {
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	defer rt.Close(context.Background())
	if e.wasi == nil {
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
			return fmt.Errorf("compile: wasi: %w", err)
		}
		e.wasi = rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	}
	e.checks++
	cm, err := rt.CompileModule(ctx, module)
	if err != nil {
		return permanent(fmt.Errorf("compile: %w", err))
	}
	// Closed explicitly: a runtime's close leaves compiled modules in the cache's engine.
	defer cm.Close(context.Background())
	if err := checkLink(e.wasi, cm); err != nil {
		return permanent(fmt.Errorf("link: %w", err))
	}
	return nil
}

// checkLink tells, from the compiled module's declared imports and exports, whether it is a
// devhost plugin that links against this host: every import is a host function of the ABI
// or of WASI with its exact type (so none of extism's own kernel functions, such as its
// HTTP client or its variables, is reachable), the module keeps its memory to itself, and
// it exports a memory, dev_init and dev_event.
func checkLink(wasi map[string]api.FunctionDefinition, cm wazero.CompiledModule) error {
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		var params, results []api.ValueType
		switch mod {
		case abi.Module:
			if name == fuel.Import {
				params, results = nil, []api.ValueType{api.ValueTypeI32}
				break
			}
			sig, ok := abi.Signatures[name]
			if !ok {
				return fmt.Errorf("imports %s %s, which this host does not provide", mod, name)
			}
			params, results = valueTypes(sig.Params), valueTypes(sig.Results)
		case wasi_snapshot_preview1.ModuleName:
			w, ok := wasi[name]
			if !ok {
				return fmt.Errorf("imports %s %s, which this host does not provide", mod, name)
			}
			params, results = w.ParamTypes(), w.ResultTypes()
		default:
			return fmt.Errorf("imports %s %s: plugins import only from %s and %s", mod, name, abi.Module, wasi_snapshot_preview1.ModuleName)
		}
		if !slices.Equal(def.ParamTypes(), params) || !slices.Equal(def.ResultTypes(), results) {
			return fmt.Errorf("imports %s %s with another type than this host's", mod, name)
		}
	}
	if len(cm.ImportedMemories()) > 0 {
		return errors.New("imports a memory: a plugin has its own")
	}
	if len(cm.ExportedMemories()) == 0 {
		return errors.New("the module exports no linear memory")
	}
	exports := cm.ExportedFunctions()
	want := valueTypes(abi.ExportSignature.Results)
	for _, name := range []string{abi.ExportInit, abi.ExportEvent} {
		def, ok := exports[name]
		if !ok {
			return errors.New("not a devhost plugin: exports dev_init and dev_event are required")
		}
		if len(def.ParamTypes()) != 0 || !slices.Equal(def.ResultTypes(), want) {
			return fmt.Errorf("not a devhost plugin: %s must take nothing and return an i32", name)
		}
	}
	return nil
}

// instance is one running copy of a plugin's module.
type instance struct {
	p      *extism.Plugin
	alloc  *allocator
	memory *linearMem // the plugin's own linear memory
	// guarded: the module has stackguard's getter (a module defining no function has none).
	guarded     bool
	initialized bool
	closed      atomic.Bool
	budget      uint32 // the stack budget
	// mod is the plugin's own module, known from the first call on (capture); fns caches its
	// exports. Only the calling goroutine uses them.
	mod api.Module
	fns map[string]api.Function
}

// instantiate starts an instance within limit (the module's start function runs here):
// no filesystem, no stdout or stderr, real random bytes, a monotonic clock that runs at the
// real pace (wazero's default advances 1 ms per reading, which makes the Go runtime inside
// believe time races and preempt itself constantly), the device's wall clock, and a sleep
// that returns at once: a plugin cannot block, a plugin that tries to sleep spins into its
// time limit. Timers belong to the host. Cancelling ctx (a stop) ends it at once.
func (e *engine) instantiate(ctx context.Context, c *compiled, wall func() time.Time, limit time.Duration) (*instance, error) {
	al := &allocator{limit: uint64(e.pages) * 65536}
	// extism names the instance and runs no start function of WASI's (_initialize runs in
	// the first call, with the host functions).
	mc := wazero.NewModuleConfig().
		WithRandSource(rand.Reader).WithSysNanotime().
		WithWalltime(func() (int64, int32) {
			t := wall()
			return t.Unix(), int32(t.Nanosecond())
		}, sys.ClockResolution(time.Microsecond))
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// A start function's loops ask refuel for fuel, through extism's wrapper of host
	// functions, which wants a plugin in the context: there is none yet, and refuel uses none.
	ictx := context.WithValue(experimental.WithMemoryAllocator(sctx, al), extism.PluginCtxKey("plugin"), (*extism.Plugin)(nil))
	p, err := c.cp.Instance(ictx, extism.PluginInstanceConfig{ModuleConfig: mc})
	e.reclaim.wait()
	if err != nil {
		return nil, callError("start", sctx, err)
	}
	p.SetLogger(func(extism.LogLevel, string) {})
	in := &instance{p: p, alloc: al, budget: e.stack, guarded: p.FunctionExists(stackguard.Getter)}
	// The allocator saw two memories: extism's kernel's (Plugin.Memory) and the plugin's own.
	if b, ok := p.Memory().Read(0, 1); ok {
		in.memory = al.other(b)
	}
	if in.memory == nil || !p.FunctionExists(abi.ExportInit) || !p.FunctionExists(abi.ExportEvent) {
		in.close()
		return nil, permanent(errors.New("the module's memory is empty or its exports are missing"))
	}
	return in, nil
}

// call runs one export. The first call initialises the guest runtime (_initialize) through
// the stack guard's getter, so that a failure there is named as such and a failure of the
// export after it can still ask the getter (extism would initialise again otherwise).
func (in *instance) call(ctx context.Context, export string) (uint32, error) {
	if !in.initialized {
		in.initialized = true
		if in.guarded {
			if _, _, err := in.p.CallWithContext(context.WithValue(ctx, captureKey{}, in), stackguard.Getter, nil); err != nil {
				return 0, callError("_initialize", ctx, err)
			}
		}
	}
	rc, err := in.invoke(ctx, export)
	if err != nil {
		if in.overBudget() {
			return 0, fmt.Errorf("%s: trap: stack budget exceeded (unbounded recursion?)", export)
		}
		return 0, callError(export, ctx, err)
	}
	return rc, nil
}

// invoke calls an export: straight through wazero once the first call has shown the
// plugin's module (see capture), through extism's Plugin otherwise. The host functions find
// the Plugin in the context as extism's own calls provide it. A WASI exit with code 0 is a
// success, as extism has it.
func (in *instance) invoke(ctx context.Context, export string) (uint32, error) {
	if in.mod == nil {
		rc, _, err := in.p.CallWithContext(ctx, export, nil)
		return rc, err
	}
	if in.mod.IsClosed() {
		// wazero answers a call into a closed module with exit code 0: not a success.
		return 0, errors.New("module is closed")
	}
	f := in.fns[export]
	if f == nil {
		if f = in.mod.ExportedFunction(export); f == nil {
			return 0, fmt.Errorf("unknown function: %s", export)
		}
		in.fns[export] = f
	}
	res, err := f.Call(context.WithValue(ctx, extism.PluginCtxKey("plugin"), in.p))
	var exit *sys.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(res) == 0 {
		return 0, nil
	}
	return api.DecodeU32(res[0]), nil
}

// captureKey carries, in the context of an instance's first call, the instance that wants
// to learn its module.
type captureKey struct{}

// capture is the function listener factory of every compilation: it listens to stackguard's
// getter alone, which the host calls first in every instance, and hands the module the getter
// runs in (the plugin's own) to the instance in the call's context. wazero compiles the
// listener's hook into that one function; every other function is compiled as without a
// listener.
type capture struct{}

func (capture) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if !slices.Contains(def.ExportNames(), stackguard.Getter) {
		return nil
	}
	return experimental.FunctionListenerFunc(func(ctx context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64, _ experimental.StackIterator) {
		if in, ok := ctx.Value(captureKey{}).(*instance); ok && in.mod == nil {
			in.mod, in.fns = mod, map[string]api.Function{}
		}
	})
}

// overBudget tells whether the instance's calls passed the stack budget: the counter is
// left above it by the trap that stopped them. An instance closed by its time limit or a
// stop cannot answer, and was not stopped by the guard.
func (in *instance) overBudget() bool {
	if !in.guarded {
		return false
	}
	n, _, err := in.p.CallWithContext(context.Background(), stackguard.Getter, nil)
	return err == nil && n > in.budget
}

func (in *instance) close() {
	in.closed.Store(true)
	_ = in.p.Close(context.Background())
}

// isClosed tells that the instance was closed by the host. One that its context closed is
// known by the failed call that did it.
func (in *instance) isClosed() bool { return in.closed.Load() }

// bytes is the plugin's linear memory (extism's kernel's is not the plugin's).
func (in *instance) bytes() uint64 { return in.memory.size.Load() }

// callError describes why a call (or the start) failed, in words an operator understands.
func callError(fn string, ctx context.Context, err error) error {
	var exit *sys.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: time limit exceeded", fn)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("%s: stopped", fn)
	case errors.As(err, &exit):
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("%s: time limit exceeded", fn)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("%s: stopped", fn)
		}
		return fmt.Errorf("%s: exited with code %d", fn, exit.ExitCode())
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i > 0 {
		msg = msg[:i] // the first line names the trap; the wasm stack follows
	}
	return fmt.Errorf("%s: trap: %s", fn, msg)
}
