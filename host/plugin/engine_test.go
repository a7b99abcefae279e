package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/plugin/fuel"
)

// wasmImport is one imported function of a hand-built module: type 0 is () -> i32, type 1
// is (i32, i32) -> i32.
type wasmImport struct {
	module, name string
	typ          byte
}

// handModule builds a module importing imports, defining one function per export (each
// returning rc) and exporting them beside a memory of one page.
func handModule(imports []wasmImport, exports []string, rc byte) []byte {
	name := func(b []byte, s string) []byte { return append(append(b, byte(len(s))), s...) }
	section := func(out []byte, id byte, body []byte) []byte {
		return append(append(out, id, byte(len(body))), body...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{2, 0x60, 0, 1, 0x7f, 0x60, 2, 0x7f, 0x7f, 1, 0x7f})
	imp := []byte{byte(len(imports))}
	for _, i := range imports {
		imp = append(name(name(imp, i.module), i.name), 0x00, i.typ)
	}
	out = section(out, 2, imp)
	fn := []byte{byte(len(exports))}
	for range exports {
		fn = append(fn, 0)
	}
	out = section(out, 3, fn)
	out = section(out, 5, []byte{1, 0, 1})
	exp := name([]byte{byte(len(exports) + 1)}, "memory")
	exp = append(exp, 0x02, 0)
	for i, e := range exports {
		exp = append(name(exp, e), 0x00, byte(len(imports)+i))
	}
	out = section(out, 7, exp)
	code := []byte{byte(len(exports))}
	for range exports {
		code = append(code, 4, 0x00, 0x41, rc, 0x0b)
	}
	return section(out, 10, code)
}

// The link check, made from wazero's declared definitions because extism exposes neither the
// compiled module nor an instance's types, refuses every module that is not a devhost plugin
// linking against this host, extism's own host functions included, for good.
func TestLinkCheck(t *testing.T) {
	exports := []string{abi.ExportInit, abi.ExportEvent}
	cases := []struct {
		name    string
		imports []wasmImport
		exports []string
		want    string // "" links
	}{
		{"plain", nil, exports, ""},
		{"abi import", []wasmImport{{abi.Module, abi.FnLog, 0}}, exports, "with another type"},
		{"extism kernel", []wasmImport{{"extism:host/env", "http_request", 1}}, exports, "plugins import only from"},
		{"unknown host function", []wasmImport{{abi.Module, "nope", 0}}, exports, "does not provide"},
		{"unknown wasi function", []wasmImport{{"wasi_snapshot_preview1", "nope", 0}}, exports, "does not provide"},
		{"no dev_event", nil, []string{abi.ExportInit}, "exports dev_init and dev_event are required"},
		// The host's fuel import is the host's to add.
		{"imports refuel", []wasmImport{{abi.Module, fuel.Import, 0}}, exports, "imports " + fuel.Import},
	}
	e, err := newEngine("", DefaultMemoryPages, DefaultStackBytes, hostFunctions())
	if err != nil {
		t.Fatal(err)
	}
	defer e.close(context.Background())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cp, key, err := e.acquire(context.Background(), handModule(c.imports, c.exports, 7))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				e.release(key)
				if cp == nil {
					t.Fatal("no compiled module")
				}
				return
			}
			if err == nil {
				e.release(key)
				t.Fatalf("linked, want %q", c.want)
			}
			t.Logf("refused: %v", err)
			if !isPermanent(err) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v (permanent %v), want a permanent one saying %q", err, isPermanent(err), c.want)
			}
		})
	}
}

// An instance runs through extism: the first call initialises it, the exports answer, the
// plugin's own memory is found (extism's kernel memory is not it) and counted alone.
func TestInstanceThroughExtism(t *testing.T) {
	in := startInstance(t, handModule(nil, []string{abi.ExportInit, abi.ExportEvent}, 7))
	if !in.guarded {
		t.Error("the stack guard's getter is not exported")
	}
	if got := in.bytes(); got != 65536 {
		t.Errorf("memory %d bytes, want the plugin's one page", got)
	}
	if len(in.memory.buf) != 65536 {
		t.Errorf("the plugin's memory is %d bytes, want its one page", len(in.memory.buf))
	}
	for _, export := range []string{abi.ExportInit, abi.ExportEvent, abi.ExportEvent} {
		rc, err := in.call(context.Background(), export)
		if err != nil || rc != 7 {
			t.Fatalf("%s = %d, %v; want 7", export, rc, err)
		}
	}
	if in.mod == nil {
		t.Error("calls after the first do not go to the plugin's module directly")
	}
	in.close()
	if !in.isClosed() || in.bytes() != 0 {
		t.Errorf("closed %v with %d bytes, want closed with none", in.isClosed(), in.bytes())
	}
}

// pastDeadline is a context whose deadline has passed while its timer has not fired yet, as
// when the timer waits for a free thread.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// refuel answers the next allowance while the call may go on, and traps with the exit code
// callError turns into the operator's words once it may not.
// metered is ctx carrying a session whose call in progress has limit, on a clock that
// stands still.
func metered(ctx context.Context, limit time.Duration) context.Context {
	s := &session{meter: newCallMeter(clockwork.NewFakeClock(), func() bool { return false }, limit)}
	return context.WithValue(ctx, sessionKey{}, s)
}

func TestRefuel(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	cases := []struct {
		name string
		ctx  context.Context
		want string // "" answers fuel
	}{
		{"running", context.Background(), ""},
		{"stopped", cancelled, "dev_event: stopped"},
		{"time limit", expired, "dev_event: time limit exceeded"},
		{"deadline passed, timer late", pastDeadline{context.Background()}, "dev_event: time limit exceeded"},
		// A call of a session: its meter counts the time it ran.
		{"call running", metered(context.Background(), time.Second), ""},
		{"call ran its limit", metered(context.Background(), 0), "dev_event: time limit exceeded"},
		{"call stopped", metered(cancelled, time.Second), "dev_event: stopped"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := []uint64{0}
			var got error
			func() {
				defer func() {
					if r := recover(); r != nil {
						got = r.(error)
					}
				}()
				refuel(c.ctx, st)
			}()
			if c.want == "" {
				if got != nil || st[0] != fuel.Fuel {
					t.Errorf("answered %d, trapped %v; want %d", st[0], got, fuel.Fuel)
				}
				return
			}
			if got == nil {
				t.Fatalf("answered %d, want a trap", st[0])
			}
			if msg := callError(abi.ExportEvent, context.Background(), got).Error(); msg != c.want {
				t.Errorf("reported %q, want %q", msg, c.want)
			}
		})
	}
}

// Code compiled before fuel is removed from the cache directory; the code lives in a
// directory of its own, and what else the directory holds stays.
func TestCodeCacheDir(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "wazero-v1.12.0-amd64-linux")
	other := filepath.Join(dir, "keep")
	for _, d := range []string{old, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := codeCacheDir(dir); got != filepath.Join(dir, "fuel") {
		t.Errorf("code in %s", got)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old code is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another entry went: %v", err)
	}
}

// A module that passed the link check is not compiled a second time for the check after a
// reboot: the verdict is kept beside the compiled code. A refused module leaves none.
func TestLinkVerdictKept(t *testing.T) {
	dir := t.TempDir()
	good := handModule(nil, []string{abi.ExportInit, abi.ExportEvent}, 7)
	bad := handModule([]wasmImport{{"extism:host/env", "http_request", 1}}, []string{abi.ExportInit, abi.ExportEvent}, 7)
	boot := func() *engine {
		e, err := newEngine(dir, DefaultMemoryPages, DefaultStackBytes, hostFunctions())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.close(context.Background()) })
		return e
	}
	e := boot()
	_, key, err := e.acquire(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	e.release(key)
	if _, _, err := e.acquire(context.Background(), bad); err == nil {
		t.Fatal("the extism kernel import linked")
	}
	markers, _ := filepath.Glob(filepath.Join(dir, "fuel", "linked-*", "*"))
	if len(markers) != 1 {
		t.Fatalf("%d verdicts kept, want 1 (the good module's): %v", len(markers), markers)
	}

	e = boot()
	if _, key, err = e.acquire(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	e.release(key)
	if e.checks != 0 {
		t.Error("the known module was compiled for the check again")
	}
	if _, _, err := e.acquire(context.Background(), bad); err == nil || !isPermanent(err) {
		t.Errorf("the refused module: %v, want refused again", err)
	}
}

// A plugin that exits through WASI with code 0 ends its call successfully (as extism has it),
// and a later call into the closed module fails instead of answering 0 without running.
func TestExitZeroThenClosed(t *testing.T) {
	section := func(out []byte, id byte, body ...byte) []byte {
		return append(append(out, id, byte(len(body))), body...)
	}
	mod := []byte("\x00asm\x01\x00\x00\x00")
	mod = section(mod, 1, 2, 0x60, 0, 1, 0x7f, 0x60, 1, 0x7f, 0) // ()→i32, (i32)→()
	imp := append([]byte{1, byte(len("wasi_snapshot_preview1"))}, "wasi_snapshot_preview1"...)
	imp = append(append(imp, byte(len("proc_exit"))), "proc_exit"...)
	mod = section(mod, 2, append(imp, 0x00, 1)...)
	mod = section(mod, 3, 2, 0, 0)
	mod = section(mod, 5, 1, 0, 1)
	exp := []byte{3, 6, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0}
	exp = append(append(append(exp, byte(len(abi.ExportInit))), abi.ExportInit...), 0x00, 1)
	exp = append(append(append(exp, byte(len(abi.ExportEvent))), abi.ExportEvent...), 0x00, 2)
	mod = section(mod, 7, exp...)
	mod = section(mod, 10, 2,
		4, 0x00, 0x41, 0x00, 0x0b, // dev_init: 0
		8, 0x00, 0x41, 0x00, 0x10, 0x00, 0x41, 0x05, 0x0b) // dev_event: proc_exit(0); 5

	in := startInstance(t, mod)
	if rc, err := in.call(context.Background(), abi.ExportInit); err != nil || rc != 0 {
		t.Fatalf("dev_init = %d, %v", rc, err)
	}
	if rc, err := in.call(context.Background(), abi.ExportEvent); err != nil || rc != 0 {
		t.Fatalf("dev_event exiting 0 = %d, %v; want 0 and no error", rc, err)
	}
	if rc, err := in.call(context.Background(), abi.ExportEvent); err == nil {
		t.Fatalf("a call into the exited module answered %d and no error", rc)
	}
}

// startInstance compiles mod on an engine of its own and starts one instance of it; the
// test's cleanup closes the instance, releases the module and closes the engine.
func startInstance(t *testing.T, mod []byte) *instance {
	t.Helper()
	e, err := newEngine("", DefaultMemoryPages, DefaultStackBytes, hostFunctions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close(context.Background()) })
	cp, key, err := e.acquire(context.Background(), mod)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.release(key) })
	in, err := e.instantiate(context.Background(), cp, time.Now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.close)
	return in
}

// The rewrite of a module (fuel, stack guard) is kept beside the compiled code and read back
// by the next engine, as after a reboot; a kept file that does not match its checksum is
// rewritten, and an earlier executable's directory goes.
func TestInstrumentedModuleKept(t *testing.T) {
	if executableID() == "" {
		t.Skip("no build ID in this executable: nothing is kept")
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "fuel", instrumentedPrefix+"0000000000000000")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	mod := handModule(nil, []string{abi.ExportInit, abi.ExportEvent}, 7)
	e, err := newEngine(dir, DefaultMemoryPages, DefaultStackBytes, hostFunctions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.close(context.Background()) })
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("an earlier executable's rewrites were kept: %v", err)
	}
	sum := sha256.Sum256(mod)
	key := hex.EncodeToString(sum[:])
	fresh, intact, err := e.instrument(mod, key)
	if err != nil || intact != nil {
		t.Fatalf("the first rewrite: %v, a kept file's check %v", err, intact != nil)
	}
	path := e.instrumentedPath(key)
	if got, ok := readInstrumented(path); !ok || !bytes.Equal(got, fresh) {
		t.Fatalf("kept %v, same as the rewrite %v", ok, bytes.Equal(got, fresh))
	}
	// What is kept is what the next start compiles: a planted file is taken as it is.
	planted := append(bytes.Clone(fresh), 0)
	if err := writeInstrumented(path, planted); err != nil {
		t.Fatal(err)
	}
	if got, intact, err := e.instrument(mod, key); err != nil || !bytes.Equal(got, planted) || intact == nil || !intact() {
		t.Fatalf("the kept rewrite was not read: %v", err)
	}
	// A damaged file is found so while its bytes compile, and the module is compiled from a
	// new rewrite, which is kept.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, intact, err := e.instrument(mod, key); err != nil || intact == nil || intact() {
		t.Fatalf("a damaged rewrite passed its check: %v", err)
	}
	c, err := e.compile(context.Background(), mod, key)
	if err != nil {
		t.Fatalf("compiling over a damaged rewrite: %v", err)
	}
	c.close(context.Background())
	if got, ok := readInstrumented(path); !ok || !bytes.Equal(got, fresh) {
		t.Fatal("the damaged rewrite was not written again")
	}
	// The budget and fuel are in the name: another budget is another file.
	other := &engine{cacheDir: e.cacheDir, stack: e.stack * 2}
	if other.instrumentedPath(key) == path {
		t.Fatal("one file for two stack budgets")
	}
}

// BenchmarkInstrument is the rewrite step of a start (fuel and stack guard) on the test
// module: rewrite does the work, as a start did before the rewrite was kept; kept reads the
// kept rewrite back, as a start after a reboot does.
func BenchmarkInstrument(b *testing.B) {
	mod := testModule(b)
	sum := sha256.Sum256(mod)
	key := hex.EncodeToString(sum[:])
	for _, kept := range []bool{false, true} {
		name := "rewrite"
		if kept {
			name = "kept"
		}
		b.Run(name, func(b *testing.B) {
			dir := ""
			if kept {
				dir = b.TempDir()
			}
			e, err := newEngine(dir, DefaultMemoryPages, DefaultStackBytes, hostFunctions())
			if err != nil {
				b.Fatal(err)
			}
			defer e.close(context.Background())
			if _, _, err := e.instrument(mod, key); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(mod)))
			for b.Loop() {
				_, intact, err := e.instrument(mod, key)
				if err != nil || (intact != nil && !intact()) {
					b.Fatal(err)
				}
			}
		})
	}
}
