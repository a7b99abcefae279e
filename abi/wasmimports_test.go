package abi_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"devhost/abi"
)

// The committed import declarations are what the generator makes of today's table: a
// change to Signatures or ParamNames without `make generate` fails here.
func TestGeneratedWasmImportsAreCurrent(t *testing.T) {
	for _, c := range []struct{ pkg, file string }{
		{"sdk", filepath.Join("..", "sdk", "imports_wasip1.go")},
		{"main", filepath.Join("..", "host", "plugin", "testdata", "multi", "imports_wasip1.go")},
	} {
		want, err := abi.WasmImports(c.pkg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatalf("%s: %v (regenerate with make generate)", c.file, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what abi.WasmImports generates now: run make generate", c.file)
		}
		if n := bytes.Count(got, []byte("//go:wasmimport "+abi.Module+" ")); n != len(abi.Signatures) {
			t.Errorf("%s declares %d imports, the ABI has %d", c.file, n, len(abi.Signatures))
		}
	}
}

func TestWasmImportNames(t *testing.T) {
	for name, want := range map[string]string{
		abi.FnEventRead: "hEventRead", abi.FnSKUnsub: "hSKUnsubscribe", abi.FnHTTPReply: "hHTTPReply",
		abi.FnNsRegister: "hNsRegister", abi.FnBLEAdvertise: "hBLEAdvertise", abi.FnGPIOWatch: "hGPIOWatch",
	} {
		if got := abi.ImportName(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	for name, sig := range abi.Signatures {
		if len(abi.ParamNames[name]) != len(sig.Params) {
			t.Errorf("%s: %d parameter names for %d parameters", name, len(abi.ParamNames[name]), len(sig.Params))
		}
	}
	if len(abi.ParamNames) != len(abi.Signatures) {
		t.Errorf("%d parameter name lists for %d functions", len(abi.ParamNames), len(abi.Signatures))
	}
}
