package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"devhost/abi"
)

// The committed declarations are what the generator makes of today's table: a change to
// abi.Signatures or abi.ParamNames without `make generate` fails here.
func TestGeneratedImportsAreCurrent(t *testing.T) {
	file := filepath.Join("..", "..", "hostcall", "imports_wasip1.go")
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (regenerate with make generate)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what wasmimports generates now: run make generate", file)
	}
	if n := bytes.Count(got, []byte("//go:wasmimport "+abi.Module+" ")); n != len(abi.Signatures) {
		t.Errorf("%s declares %d imports, the ABI has %d", file, n, len(abi.Signatures))
	}
}

func TestGoNames(t *testing.T) {
	for name, want := range map[string]string{
		abi.FnEventRead: "EventRead", abi.FnSKUnsub: "SKUnsubscribe", abi.FnHTTPReply: "HTTPReply",
		abi.FnNsRegister: "NsRegister", abi.FnBLEAdvertise: "BLEAdvertise", abi.FnGPIOWatch: "GPIOWatch",
		abi.FnWiFiProvision: "WiFiProvision", abi.FnProvPoP: "ProvPoP",
	} {
		if got := goName(name); got != want {
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
