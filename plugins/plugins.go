// Package plugins holds the plugins built with devhost/sdk (app, the switch bank; n2k, the
// NMEA 2000 gateway) and the test plugins under testdata/ that the plugin host's failure
// tests load, with helpers that build them for the device. Each plugin directory holds its
// main.go and its manifest.json; the id in the manifest is the directory's name.
//
// Test plugins (testdata/<name>, documented in testdata/README.md): trapinit, badinit, loop,
// memhog, garbage, badns, ns, nocaps, afterstop, bench, powerhold.
package plugins

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"devhost/abi"
)

// Dir is this directory in the source tree (tests and tools run from the source tree).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Build compiles the plugin in dir (relative to Dir, e.g. "app" or "testdata/loop") for the
// device and writes the module to out: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
func Build(ctx context.Context, dir, out string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	out, err = filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	cmd := exec.CommandContext(ctx, gobin, "build", "-buildmode=c-shared", "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Dir = Dir()
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("plugins: build %s: %w\n%s", dir, err, b)
	}
	return nil
}

// Manifest reads and validates the manifest of the plugin in dir (relative to Dir); it
// returns the bytes to sign and the parsed manifest.
func Manifest(dir string) ([]byte, abi.Manifest, error) {
	b, err := os.ReadFile(filepath.Join(Dir(), dir, "manifest.json"))
	if err != nil {
		return nil, abi.Manifest{}, fmt.Errorf("plugins: %w", err)
	}
	m, err := abi.ParseManifest(b)
	if err != nil {
		return nil, abi.Manifest{}, fmt.Errorf("plugins: %s: %w", dir, err)
	}
	return b, m, nil
}

// TestPlugins lists the test plugins under testdata/.
var TestPlugins = []string{"trapinit", "badinit", "loop", "memhog", "garbage", "badns", "ns", "nocaps", "afterstop", "bench", "powerhold", "minimal"}
