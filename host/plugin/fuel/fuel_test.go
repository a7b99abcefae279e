package fuel

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"devhost/host/plugin/wasmbin"
	"devhost/host/plugin/wasmbin/wasmtest"
)

// sample imports env.seven ()→i32 and defines, in this order:
//
//	0 (import) seven
//	1 count(n i32) i32: loops n times, then returns n + helper()
//	2 helper() i32: calls seven through the table (element segment), plus the global g
//	3 viaRef() i32: the funcref global holds helper (ref.func in a constant expression)
//	4 start: sets g to 100
//
// exported as count, helper and viaRef; the start section names function 4. Every index of a
// defined function moves when the import is added.
func sample() []byte {
	count := []byte{0x01, 0x01, 0x7f, // one i32 local: i
		0x02, 0x40, 0x03, 0x40, // block, loop
		0x20, 0x01, 0x20, 0x00, 0x4e, 0x0d, 0x01, // i >= n: br_if 1 (out)
		0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, // i++
		0x0c, 0x00, // br 0
		0x0b, 0x0b, // end loop, end block
		0x20, 0x00, 0x10, 0x02, 0x6a, // n + helper()
		0x0b}
	helper := []byte{0x00,
		0x41, 0x00, 0x11, 0x00, 0x00, // i32.const 0, call_indirect type 0 table 0 (seven)
		0x23, 0x00, 0x6a, 0x0b} // + global g
	viaRef := []byte{0x00, 0x41, 0x01, 0x11, 0x00, 0x00, 0x0b} // the table's slot 1: helper
	start := []byte{0x00, 0x41, 0xe4, 0x00, 0x24, 0x00, 0x0b}  // g = 100
	return wasmbin.Encode(
		wasmtest.Sec(wasmbin.SecType, 0x03, 0x60, 0x00, 0x01, 0x7f, 0x60, 0x01, 0x7f, 0x01, 0x7f, 0x60, 0x00, 0x00),
		wasmtest.Sec(wasmbin.SecImport, 0x01, 0x03, 'e', 'n', 'v', 0x05, 's', 'e', 'v', 'e', 'n', 0x00, 0x00),
		wasmtest.Sec(wasmbin.SecFunction, 0x04, 0x01, 0x00, 0x00, 0x02),
		wasmtest.Sec(4, 0x01, 0x70, 0x00, 0x02), // a funcref table of at least 2
		// g (mut i32 = 0), and a funcref global holding helper.
		wasmtest.Sec(wasmbin.SecGlobal, 0x02, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x70, 0x00, 0xd2, 0x02, 0x0b),
		wasmtest.Sec(wasmbin.SecExport, 0x03,
			0x05, 'c', 'o', 'u', 'n', 't', 0x00, 0x01,
			0x06, 'h', 'e', 'l', 'p', 'e', 'r', 0x00, 0x02,
			0x06, 'v', 'i', 'a', 'R', 'e', 'f', 0x00, 0x03),
		wasmtest.Sec(wasmbin.SecStart, 0x04),
		// Form 0: table 0 at offset 0 = [seven, helper]; form 5 (passive, expressions): [ref.func count].
		wasmtest.Sec(wasmbin.SecElement, 0x02, 0x00, 0x41, 0x00, 0x0b, 0x02, 0x00, 0x02,
			0x05, 0x70, 0x01, 0xd2, 0x01, 0x0b),
		wasmtest.Code(count, helper, viaRef, start),
		wasmtest.Sec(wasmbin.SecCustom, append(wasmbin.AppendName(nil, "name"), 0x00, 0x02, 0x01, 'm')...),
	)
}

// instrumented is module after Instrument, which must accept it.
func instrumented(t *testing.T, module []byte) []byte {
	t.Helper()
	out, err := Instrument(module, "env")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// instantiate instantiates module with env.seven and the refuel import, whose calls are
// counted and which ends the call once stop says so (nil: never).
func instantiate(t *testing.T, module []byte, refuels *int, stop func() bool) api.Module {
	t.Helper()
	return wasmtest.Instantiate(t, module, func(env wazero.HostModuleBuilder) wazero.HostModuleBuilder {
		return env.NewFunctionBuilder().WithFunc(func() int32 {
			*refuels++
			if stop != nil && stop() {
				panic(errors.New("out of time"))
			}
			return Fuel
		}).Export(Import)
	})
}

func call(t *testing.T, m api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	r, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r[0]
}

// The instrumented module computes what the original does: every renumbered index (calls,
// exports, start, element segments, ref.func in globals) still names the same function.
func TestSameResults(t *testing.T) {
	orig := sample()
	inst := instrumented(t, orig)
	var n int
	a := instantiate(t, orig, &n, nil)
	b := instantiate(t, inst, &n, nil)
	for _, c := range []struct {
		name string
		args []uint64
	}{{"count", []uint64{5}}, {"helper", nil}, {"viaRef", nil}} {
		if x, y := call(t, a, c.name, c.args...), call(t, b, c.name, c.args...); x != y {
			t.Errorf("%s: %d instrumented, %d before", c.name, y, x)
		}
	}
	if got := call(t, b, "helper"); got != 107 {
		t.Errorf("helper answered %d, want 107 (seven through the table plus the start's 100)", got)
	}
	if n != 0 {
		t.Errorf("refuel called %d times for a few dozen steps", n)
	}
}

// A loop asks the host for fuel every Fuel iterations, and the host's trap ends it.
func TestLoopsAskForFuel(t *testing.T) {
	inst := instrumented(t, sample())
	var n int
	m := instantiate(t, inst, &n, nil)
	const iterations = 10 * Fuel
	if got := call(t, m, "count", iterations); got != iterations+107 {
		t.Fatalf("count answered %d", got)
	}
	// The loop header runs iterations+1 times, plus a few function entries.
	if n < 10 || n > 11 {
		t.Errorf("refuel called %d times for %d loop iterations, want 10 or 11", n, iterations)
	}

	var m2calls int
	m2 := instantiate(t, inst, &m2calls, func() bool { return m2calls == 3 })
	_, err := m2.ExportedFunction("count").Call(context.Background(), 1<<31-1)
	if err == nil || !strings.Contains(err.Error(), "out of time") {
		t.Errorf("a loop past the host's limit ended with %v, want the host's trap", err)
	}
}

// Function entries count too: a recursion without loops is bounded as well.
func TestCallsAskForFuel(t *testing.T) {
	// rec(n) = n == 0 ? 0 : rec(n-1)  (no loop)
	rec := []byte{0x00, 0x20, 0x00, 0x45, 0x04, 0x7f, 0x41, 0x00, 0x05,
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x00, 0x0b, 0x0b}
	mod := wasmbin.Encode(
		wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f),
		wasmtest.Sec(wasmbin.SecFunction, 0x01, 0x00),
		wasmtest.Sec(wasmbin.SecExport, 0x01, 0x03, 'r', 'e', 'c', 0x00, 0x00),
		wasmtest.Code(rec),
	)
	inst := instrumented(t, mod)
	var n int
	m := instantiate(t, inst, &n, nil)
	call(t, m, "rec", 3*Fuel)
	if n != 3 {
		t.Errorf("refuel called %d times for %d calls, want 3", n, 3*Fuel+1)
	}
}

func TestRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  []byte
		want string
	}{
		{"not wasm", []byte("hello world"), "not a version 1"},
		{"imports refuel itself", wasmbin.Encode(
			wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x00, 0x01, 0x7f),
			wasmtest.Sec(wasmbin.SecImport, append(wasmbin.AppendName(wasmbin.AppendName([]byte{0x01}, "env"), Import), 0x00, 0x00)...),
			wasmtest.Sec(wasmbin.SecFunction, 0x01, 0x00),
			wasmtest.Code([]byte{0x00, 0x41, 0x00, 0x0b}),
		), "imports " + Import},
		{"tail call", wasmbin.Encode(
			wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x00, 0x01, 0x7f),
			wasmtest.Sec(wasmbin.SecFunction, 0x01, 0x00),
			wasmtest.Code([]byte{0x00, 0x12, 0x00, 0x0b}),
		), "instruction 0x12"},
		{"truncated body", wasmbin.Encode(
			wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x00, 0x01, 0x7f),
			wasmtest.Sec(wasmbin.SecFunction, 0x01, 0x00),
			wasmtest.Code([]byte{0x00, 0x41}),
		), "unexpected end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Instrument(c.mod, "env")
			if err == nil || !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want malformed naming %q", err, c.want)
			}
		})
	}
}

// A module without code has nothing to meter.
func TestNoCodeUnchanged(t *testing.T) {
	mod := wasmbin.Encode(wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x00, 0x00))
	got, err := Instrument(mod, "env")
	if err != nil || string(got) != string(mod) {
		t.Errorf("got %x, %v; want the module unchanged", got, err)
	}
}

// The "name" section is dropped (its indices moved); other custom sections are kept.
func TestCustomSections(t *testing.T) {
	mod := append(sample(), wasmbin.AppendSection(nil, wasmbin.SecCustom, wasmbin.AppendName(nil, "keep"))...)
	got, err := Instrument(mod, "env")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "\x04name") || !strings.Contains(string(got), "\x04keep") {
		t.Error("want the name section dropped and the other custom section kept")
	}
}

func FuzzInstrument(f *testing.F) {
	f.Add(sample())
	f.Fuzz(func(t *testing.T, mod []byte) {
		out, err := Instrument(mod, "env")
		if err == nil && len(out) < 8 {
			t.Fatalf("no error and a %d byte module", len(out))
		}
	})
}

// An instruction whose work grows with its count (here memory.fill of 64 KiB) is charged a
// unit per KiB before it runs: a loop of them asks for fuel by the bytes it fills, not by
// its iterations alone.
func TestBulkMemoryIsCharged(t *testing.T) {
	// fill(n i32) i32: n times memory.fill(0, 0, 65536); answers n. One i32 local (the counter).
	fill := []byte{0x01, 0x01, 0x7f,
		0x02, 0x40, 0x03, 0x40, // block, loop
		0x20, 0x01, 0x20, 0x00, 0x4e, 0x0d, 0x01, // i >= n: out
		0x41, 0x00, 0x41, 0x00, 0x41, 0x80, 0x80, 0x04, 0xfc, 0x0b, 0x00, // memory.fill(0, 0, 65536)
		0x20, 0x01, 0x41, 0x01, 0x6a, 0x21, 0x01, 0x0c, 0x00, // i++, br 0
		0x0b, 0x0b, 0x20, 0x00, 0x0b}
	mod := wasmbin.Encode(
		wasmtest.Sec(wasmbin.SecType, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f),
		wasmtest.Sec(wasmbin.SecFunction, 0x01, 0x00),
		wasmtest.Sec(5, 0x01, 0x00, 0x01), // one page of memory
		wasmtest.Sec(wasmbin.SecExport, 0x01, 0x04, 'f', 'i', 'l', 'l', 0x00, 0x00),
		wasmtest.Code(fill),
	)
	inst := instrumented(t, mod)
	var n int
	m := instantiate(t, inst, &n, nil)
	const iterations = 1000 // 64,000 units of filling, 1,000 of looping
	if got := call(t, m, "fill", iterations); got != iterations {
		t.Fatalf("fill answered %d", got)
	}
	if want := iterations * 65 / Fuel; n < want {
		t.Errorf("refuel called %d times, want at least %d", n, want)
	}
	var stops int
	m2 := instantiate(t, inst, &stops, func() bool { return true })
	if _, err := m2.ExportedFunction("fill").Call(context.Background(), 1<<30); err == nil {
		t.Error("a fill loop past the host's limit went on")
	}
}
