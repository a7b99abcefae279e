package plugin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"devhost/abi"
)

// engine compiles plugin modules (through the shared on-disk compilation cache) and starts
// sandboxed instances of them.
type engine struct {
	cache wazero.CompilationCache
	pages uint32 // memory cap per linear memory, in 64 KiB pages
	funcs []extism.HostFunction
	// unbounded compiles without the termination checks that enforce the time limit. Only
	// the benchmarks set it, with a cache directory of their own: wazero's cache key does not
	// tell the two kinds of code apart.
	unbounded bool
	// compiling serialises compilations: they are CPU-bound and the host must keep answering.
	compiling sync.Mutex

	mu       sync.Mutex
	compiled map[string]*shared // by SHA-256 of the module
}

// shared is a compiled module and how many plugins use it: plugins built from the same
// module bytes share its code.
type shared struct {
	cp   *extism.CompiledPlugin
	refs int
}

func newEngine(cacheDir string, pages uint32, funcs []extism.HostFunction) (*engine, error) {
	var cache wazero.CompilationCache
	if cacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("plugin: compilation cache: %w", err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	return &engine{cache: cache, pages: pages, funcs: funcs, compiled: map[string]*shared{}}, nil
}

func (e *engine) close(ctx context.Context) { _ = e.cache.Close(ctx) }

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
func (e *engine) acquire(ctx context.Context, module []byte) (*extism.CompiledPlugin, string, error) {
	sum := sha256.Sum256(module)
	key := hex.EncodeToString(sum[:])
	e.compiling.Lock()
	defer e.compiling.Unlock()
	e.mu.Lock()
	if s := e.compiled[key]; s != nil {
		s.refs++
		e.mu.Unlock()
		return s.cp, key, nil
	}
	e.mu.Unlock()
	cp, err := e.compile(ctx, module)
	if err != nil {
		return nil, "", err
	}
	e.mu.Lock()
	e.compiled[key] = &shared{cp: cp, refs: 1}
	e.mu.Unlock()
	return cp, key, nil
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
	_ = s.cp.Close(context.Background())
}

// compile prepares a module. The wazero runtime it creates holds the per-memory cap and
// closes an instance whose call context ends (the per-call time limit).
func (e *engine) compile(ctx context.Context, module []byte) (*extism.CompiledPlugin, error) {
	rc := wazero.NewRuntimeConfig().
		WithCompilationCache(e.cache).
		WithCloseOnContextDone(!e.unbounded).
		WithMemoryLimitPages(e.pages)
	man := extism.Manifest{
		Wasm: []extism.Wasm{extism.WasmData{Data: module, Name: "main"}},
		// Setting MaxPages alone would zero the other two implicitly; plugins use neither
		// extism variables nor extism's HTTP, so zero is what is wanted, said out loud.
		Memory: &extism.ManifestMemory{MaxPages: e.pages, MaxVarBytes: 0, MaxHttpResponseBytes: 0},
	}
	cp, err := extism.NewCompiledPlugin(ctx, man, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, e.funcs)
	if err != nil {
		return nil, permanent(fmt.Errorf("compile: %w", err))
	}
	return cp, nil
}

// instance is one running copy of a plugin's module.
type instance struct {
	p      *extism.Plugin
	alloc  *allocator
	memory *linearMem // the plugin's own linear memory
	// event is dev_event, looked up once: extism's Call looks exports up (and builds a call
	// engine) on every call, which costs more than the call itself.
	event api.Function
	mod   api.Module
}

// mainModule reaches the plugin's own module inside an extism instance. go-sdk v1.7.1 (the
// pinned version) keeps it in an unexported field and offers no accessor; a version without
// that field fails here, at the first start, never silently.
func mainModule(p *extism.Plugin) (api.Module, error) {
	v := reflect.ValueOf(p).Elem().FieldByName("mainModule")
	if !v.IsValid() || !v.CanAddr() {
		return nil, errors.New("extism: the instance has no main module field (go-sdk version changed?)")
	}
	m, ok := reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem().Interface().(api.Module)
	if !ok || m == nil {
		return nil, errors.New("extism: the main module field is not a module")
	}
	return m, nil
}

// instantiate starts an instance: no filesystem, no stdout or stderr, real random bytes, a
// monotonic clock that runs at the real pace (wazero's default advances 1 ms per reading,
// which makes the Go runtime inside believe time races and preempt itself constantly), the
// device's wall clock, and a sleep that returns at once: a plugin cannot block, a plugin that
// tries to sleep spins into its time limit. Timers belong to the host.
func (e *engine) instantiate(ctx context.Context, cp *extism.CompiledPlugin, logf func(extism.LogLevel, string), wall func() time.Time) (*instance, error) {
	al := &allocator{limit: uint64(e.pages) * 65536}
	mc := wazero.NewModuleConfig().WithRandSource(rand.Reader).WithSysNanotime().
		WithWalltime(func() (int64, int32) {
			t := wall()
			return t.Unix(), int32(t.Nanosecond())
		}, sys.ClockResolution(time.Microsecond))
	inst, err := cp.Instance(experimental.WithMemoryAllocator(ctx, al), extism.PluginInstanceConfig{ModuleConfig: mc})
	if err != nil {
		if strings.Contains(err.Error(), "not exported") || strings.Contains(err.Error(), "import") {
			return nil, permanent(fmt.Errorf("link: %w", err))
		}
		return nil, fmt.Errorf("instantiate: %w", err)
	}
	inst.SetLogger(logf)
	in := &instance{p: inst, alloc: al}
	if !inst.FunctionExists(abi.ExportInit) || !inst.FunctionExists(abi.ExportEvent) {
		_ = inst.Close(context.Background())
		return nil, permanent(errors.New("not a devhost plugin: exports dev_init and dev_event are required"))
	}
	mod, err := mainModule(inst)
	if err != nil {
		_ = inst.Close(context.Background())
		return nil, permanent(err)
	}
	in.event, in.mod = mod.ExportedFunction(abi.ExportEvent), mod
	if mem := mod.Memory(); mem != nil {
		if b, ok := mem.Read(0, 1); ok {
			in.memory = al.find(b)
		}
	}
	if in.memory == nil {
		_ = inst.Close(context.Background())
		return nil, permanent(errors.New("the module exports no linear memory"))
	}
	return in, nil
}

func (in *instance) close() { _ = in.p.Close(context.Background()) }

// bytes is the linear memory the instance uses.
func (in *instance) bytes() uint64 { return in.alloc.total() }

// callError describes why a call failed, in words an operator understands.
func callError(fn string, ctx context.Context, err error) error {
	var exit *sys.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s: time limit exceeded", fn)
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
