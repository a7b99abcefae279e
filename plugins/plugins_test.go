package plugins

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEveryPluginBuildsWithAValidManifest builds each plugin for the device: go vet and go
// test skip testdata/, so this is what keeps the test plugins compiling.
func TestEveryPluginBuildsWithAValidManifest(t *testing.T) {
	dirs := []string{"app", "n2k", "ble"}
	for _, n := range TestPlugins {
		dirs = append(dirs, filepath.Join("testdata", n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, d := range dirs {
		_, m, err := Manifest(d)
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if m.ID != filepath.Base(d) {
			t.Errorf("%s: manifest id %q", d, m.ID)
		}
		out := filepath.Join(t.TempDir(), m.ID+".wasm")
		if err := Build(ctx, d, out); err != nil {
			t.Error(err)
			continue
		}
		b, err := os.ReadFile(out)
		if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
			t.Errorf("%s: no module (%v)", d, err)
		}
		for _, e := range [][]byte{[]byte("dev_init"), []byte("dev_event"), []byte("_initialize")} {
			if !bytes.Contains(b, e) {
				t.Errorf("%s: %s not found in the module", d, e)
			}
		}
	}
}
