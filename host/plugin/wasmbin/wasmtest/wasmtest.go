// Package wasmtest builds the small hand-written WebAssembly modules that the tests of the
// module rewriters (packages fuel and stackguard) instrument, and runs them in wazero beside
// the host function those modules import. Tests only: product code never imports it.
package wasmtest

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"devhost/host/plugin/wasmbin"
)

// Sec is the section id with the given body.
func Sec(id byte, body ...byte) wasmbin.Section { return wasmbin.Section{ID: id, Body: body} }

// Code is the code section of the given function bodies (each its locals, then its
// instructions and end).
func Code(bodies ...[]byte) wasmbin.Section {
	c := wasmbin.AppendU32(nil, uint32(len(bodies)))
	for _, b := range bodies {
		c = wasmbin.AppendSized(c, b)
	}
	return Sec(wasmbin.SecCode, c...)
}

// Instantiate instantiates module in a runtime of its own, which t's cleanup closes, beside a
// host module "env" that exports seven() → 7 and whatever more exports (nil: nothing else).
func Instantiate(t testing.TB, module []byte, more func(wazero.HostModuleBuilder) wazero.HostModuleBuilder) api.Module {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	env := rt.NewHostModuleBuilder("env").
		NewFunctionBuilder().WithFunc(func() int32 { return 7 }).Export("seven")
	if more != nil {
		env = more(env)
	}
	if _, err := env.Instantiate(ctx); err != nil {
		t.Fatalf("host module env: %v", err)
	}
	mod, err := rt.Instantiate(ctx, module)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return mod
}
