package stackguard

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"devhost/host/plugin/wasmbin"
	"devhost/host/plugin/wasmbin/wasmtest"
)

// counting imports env.seven ()→i32, defines a global of 42, and exports:
//
//	depth(n i32) i32: n == 0 ? seven() : depth(n-1) + 1   (recursion n deep)
//	answer() i32: the module's own global
func counting() []byte {
	depth := []byte{0x00, // no locals
		0x20, 0x00, 0x45, 0x04, 0x7f, // local.get 0, i32.eqz, if (result i32)
		0x10, 0x00, // call seven
		0x05,                                     // else
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01, // local.get 0, i32.const 1, i32.sub, call depth
		0x41, 0x01, 0x6a, // i32.const 1, i32.add
		0x0b, 0x0b}
	answer := []byte{0x00, 0x23, 0x00, 0x0b}
	return wasmbin.Encode(
		wasmtest.Sec(1, 0x02, 0x60, 0x00, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x01, 0x7f), // ()→i32, (i32)→i32
		wasmtest.Sec(2, 0x01, 0x03, 'e', 'n', 'v', 0x05, 's', 'e', 'v', 'e', 'n', 0x00, 0x00),
		wasmtest.Sec(3, 0x02, 0x01, 0x00),
		wasmtest.Sec(6, 0x01, 0x7f, 0x00, 0x41, 0x2a, 0x0b),
		wasmtest.Sec(7, 0x02, 0x05, 'd', 'e', 'p', 't', 'h', 0x00, 0x01, 0x06, 'a', 'n', 's', 'w', 'e', 'r', 0x00, 0x02),
		wasmtest.Code(depth, answer),
	)
}

// The 79-byte module: dev_init calls itself without end.
const recursionHex = "0061736d010000000108026000006000017f03030201010503010001072103066d656d6f72790200086465765f696e69740000096465765f6576656e7400010a0e02070010001a41000b040041000b"

// guarded instantiates module after Instrument, which must accept it, with budget.
func guarded(t *testing.T, module []byte, budget uint32) api.Module {
	t.Helper()
	out, err := Instrument(module, budget)
	if err != nil {
		t.Fatal(err)
	}
	return wasmtest.Instantiate(t, out, nil)
}

func call(mod api.Module, name string, args ...uint64) (uint32, error) {
	res, err := mod.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		return 0, err
	}
	return uint32(res[0]), nil
}

func TestBoundedRecursionRuns(t *testing.T) {
	mod := guarded(t, counting(), 64<<10)
	// depth has one parameter: 144 bytes a level, 455 levels fit in 64 KiB.
	for _, n := range []uint64{0, 1, 100, 400} {
		got, err := call(mod, "depth", n)
		if err != nil || got != uint32(n)+7 {
			t.Fatalf("depth(%d) = %d, %v; want %d", n, got, err, n+7)
		}
	}
	// The counter comes back to zero after every call: the same depth works again.
	if got, err := call(mod, "depth", 400); err != nil || got != 407 {
		t.Fatalf("depth(400) again = %d, %v", got, err)
	}
	if got, err := call(mod, "answer"); err != nil || got != 42 {
		t.Fatalf("answer() = %d, %v: the module's own global moved", got, err)
	}
	if g := mod.ExportedGlobal(Export); g == nil || g.Get() != 0 {
		t.Fatalf("counter %v between calls, want 0", g)
	}
	if got, err := call(mod, Getter); err != nil || got != 0 {
		t.Fatalf("%s() = %d, %v between calls, want 0", Getter, got, err)
	}
}

func TestRecursionPastTheBudgetTraps(t *testing.T) {
	mod := guarded(t, counting(), 64<<10)
	if _, err := call(mod, "depth", 1000); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("depth(1000) past a 64 KiB budget: %v, want the unreachable trap", err)
	}
	// The exported counter tells this trap from any other.
	if g := mod.ExportedGlobal(Export); g == nil || uint32(g.Get()) <= 64<<10 {
		t.Fatalf("counter %v after the guard's trap, want it above the budget", g)
	}
	// The getter, unguarded, still answers and says the same.
	if got, err := call(mod, Getter); err != nil || got <= 64<<10 {
		t.Fatalf("%s() = %d, %v after the guard's trap, want it above the budget", Getter, got, err)
	}
}

func TestEndlessRecursionTraps(t *testing.T) {
	module, err := hex.DecodeString(recursionHex)
	if err != nil {
		t.Fatal(err)
	}
	mod := guarded(t, module, 1<<20)
	if _, err := call(mod, "dev_init"); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("endless recursion: %v, want the unreachable trap", err)
	}
	// The counter stays spent after a trap: the instance is good for nothing more, which is
	// how the host treats any instance that trapped.
	if _, err := call(mod, "dev_event"); err == nil {
		t.Fatal("dev_event ran after the trap")
	}
}

func TestMalformedModulesAreRefused(t *testing.T) {
	good := counting()
	cases := map[string][]byte{
		"empty":          nil,
		"not wasm":       []byte("hello world!"),
		"version 2":      []byte("\x00asm\x02\x00\x00\x00"),
		"cut section":    good[:len(good)-3],
		"section length": append(append([]byte(nil), good[:8]...), 1, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"bad type form":  wasmbin.Encode(wasmtest.Sec(1, 0x01, 0x5f, 0x00, 0x00)),
		"type index":     wasmbin.Encode(wasmtest.Sec(1, 0x01, 0x60, 0x00, 0x00), wasmtest.Sec(3, 0x01, 0x05)),
		"bodies missing": wasmbin.Encode(wasmtest.Sec(1, 0x01, 0x60, 0x00, 0x00), wasmtest.Sec(3, 0x01, 0x00)),
		"bad import":     wasmbin.Encode(wasmtest.Sec(2, 0x01, 0x00, 0x00, 0x09)),
		"export clash": wasmbin.Encode(wasmtest.Sec(1, 0x01, 0x60, 0x00, 0x00), wasmtest.Sec(3, 0x01, 0x00),
			wasmtest.Sec(7, append(wasmbin.AppendName([]byte{0x01}, Export), 0x00, 0x00)...),
			wasmtest.Sec(10, 0x01, 0x02, 0x00, 0x0b)),
		"getter clash": wasmbin.Encode(wasmtest.Sec(1, 0x01, 0x60, 0x00, 0x00), wasmtest.Sec(3, 0x01, 0x00),
			wasmtest.Sec(7, append(wasmbin.AppendName([]byte{0x01}, Getter), 0x00, 0x00)...),
			wasmtest.Sec(10, 0x01, 0x02, 0x00, 0x0b)),
	}
	for name, b := range cases {
		if _, err := Instrument(b, 1<<20); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want a malformed module error", name, err)
		} else if name == "getter clash" && !strings.Contains(err.Error(), "exports "+Getter) {
			t.Errorf("%s: %v, want the clash named", name, err)
		}
	}
	if _, err := Instrument(good, 0); err == nil {
		t.Error("a zero budget was accepted")
	}
}

func TestModuleWithoutFunctionsIsUnchanged(t *testing.T) {
	m := wasmbin.Encode(wasmtest.Sec(5, 0x01, 0x00, 0x01))
	out, err := Instrument(m, 1<<20)
	if err != nil || string(out) != string(m) {
		t.Fatalf("got %x, %v", out, err)
	}
}

func FuzzInstrument(f *testing.F) {
	f.Add(counting())
	if b, err := hex.DecodeString(recursionHex); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Instrument(b, 1<<20)
		if err != nil {
			return
		}
		// Whatever it accepts and wazero compiles still compiles after the rewrite.
		ctx := context.Background()
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		if _, err := rt.CompileModule(ctx, b); err != nil {
			return
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Fatalf("the original compiles, the rewrite does not: %v", err)
		}
	})
}
