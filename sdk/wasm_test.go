//go:build !wasip1

package sdk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"devhost/abi"
)

// wasmModule is what the tests need from a module: its imports and exports with their types.
type wasmModule struct {
	imports map[string]abi.Signature // "module/name"
	exports map[string]abi.Signature // functions only
}

type wasmReader struct {
	b   []byte
	err error
}

func (r *wasmReader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errors.New("wasm: truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *wasmReader) uleb() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("wasm: bad LEB128")
	return 0
}

func (r *wasmReader) bytes(n uint32) []byte {
	if r.err != nil || uint32(len(r.b)) < n {
		r.err = errors.New("wasm: truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *wasmReader) name() string { return string(r.bytes(r.uleb())) }

func (r *wasmReader) types() []abi.ValueType {
	n := r.uleb()
	var out []abi.ValueType
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = append(out, abi.ValueType(r.byte()))
	}
	return out
}

// parseWasm reads the type, import, function and export sections of a module.
func parseWasm(b []byte) (*wasmModule, error) {
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		return nil, errors.New("wasm: bad header")
	}
	m := &wasmModule{imports: map[string]abi.Signature{}, exports: map[string]abi.Signature{}}
	var types []abi.Signature
	var funcs []abi.Signature // imported functions first, then defined ones
	type export struct {
		name string
		idx  uint32
	}
	var exports []export
	r := &wasmReader{b: b[8:]}
	for len(r.b) > 0 && r.err == nil {
		id := r.byte()
		sec := &wasmReader{b: r.bytes(r.uleb())}
		switch id {
		case 1: // types
			for n := sec.uleb(); n > 0 && sec.err == nil; n-- {
				if sec.byte() != 0x60 {
					return nil, errors.New("wasm: not a function type")
				}
				types = append(types, abi.Signature{Params: sec.types(), Results: sec.types()})
			}
		case 2: // imports
			for n := sec.uleb(); n > 0 && sec.err == nil; n-- {
				mod, name, kind := sec.name(), sec.name(), sec.byte()
				switch kind {
				case 0:
					t := sec.uleb()
					if int(t) >= len(types) {
						return nil, errors.New("wasm: bad type index")
					}
					m.imports[mod+"/"+name] = types[t]
					funcs = append(funcs, types[t])
				case 1: // table: reftype, limits
					sec.byte()
					if sec.byte()&1 != 0 {
						sec.uleb()
					}
					sec.uleb()
				case 2: // memory: limits
					if sec.byte()&1 != 0 {
						sec.uleb()
					}
					sec.uleb()
				case 3: // global: type, mutability
					sec.byte()
					sec.byte()
				}
			}
		case 3: // functions
			for n := sec.uleb(); n > 0 && sec.err == nil; n-- {
				t := sec.uleb()
				if int(t) >= len(types) {
					return nil, errors.New("wasm: bad type index")
				}
				funcs = append(funcs, types[t])
			}
		case 7: // exports
			for n := sec.uleb(); n > 0 && sec.err == nil; n-- {
				name, kind, idx := sec.name(), sec.byte(), sec.uleb()
				if kind == 0 {
					exports = append(exports, export{name, idx})
				}
			}
		}
		if sec.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, sec.err)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	for _, e := range exports {
		if int(e.idx) < len(funcs) {
			m.exports[e.name] = funcs[e.idx]
		}
	}
	return m, nil
}

func sameSig(a, b abi.Signature) bool {
	return bytes.Equal(vt(a.Params), vt(b.Params)) && bytes.Equal(vt(a.Results), vt(b.Results))
}

func vt(ts []abi.ValueType) []byte {
	out := make([]byte, len(ts))
	for i, t := range ts {
		out[i] = byte(t)
	}
	return out
}

// TestWasmModuleMatchesABI builds the allcalls plugin for wasip1 and checks that it imports
// exactly the ABI's host functions with the ABI's types (and nothing else from the device's
// module), and exports dev_init and dev_event as the ABI says.
func TestWasmModuleMatchesABI(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	out := filepath.Join(t.TempDir(), "allcalls.wasm")
	cmd := exec.Command(gobin, "build", "-buildmode=c-shared", "-o", out, "./testdata/allcalls")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseWasm(b)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for key, sig := range m.imports {
		name, ok := bytes.CutPrefix([]byte(key), []byte(abi.Module+"/"))
		if !ok {
			continue
		}
		want, known := abi.Signatures[string(name)]
		if !known {
			t.Errorf("imports %s, which the ABI does not define", key)
			continue
		}
		if !sameSig(sig, want) {
			t.Errorf("%s: type %v, the ABI says %v", name, sig, want)
		}
		seen++
	}
	if seen != len(abi.Signatures) {
		t.Errorf("imports %d of the ABI's %d host functions", seen, len(abi.Signatures))
	}
	for _, e := range []string{abi.ExportInit, abi.ExportEvent} {
		sig, ok := m.exports[e]
		if !ok || !sameSig(sig, abi.ExportSignature) {
			t.Errorf("export %s: %v (present %v)", e, sig, ok)
		}
	}
	if _, ok := m.exports["_initialize"]; !ok {
		t.Error("no _initialize export: not built as a reactor")
	}
}
