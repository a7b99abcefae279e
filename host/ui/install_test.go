package ui

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

func buildFS(index string) fstest.MapFS {
	return fstest.MapFS{
		"index.html":       {Data: []byte(index)},
		"index.html.gz":    {Data: []byte("gz:" + index)},
		"assets/app-1.js":  {Data: []byte("js")},
		"README":           {Data: []byte("kept out of nothing")},
		"assets/app-1.css": {Data: []byte("css")},
	}
}

func TestInstall(t *testing.T) {
	read := func(t *testing.T, dir, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("empty partition gets the build", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ui")
		wrote, err := Install(dir, buildFS("A"))
		if err != nil || !wrote {
			t.Fatalf("install: %v %v", wrote, err)
		}
		if read(t, dir, "index.html") != "A" || read(t, dir, "assets/app-1.js") != "js" {
			t.Fatal("files not written")
		}
		if !New(dir, nil).Available() {
			t.Fatal("ui not available after install")
		}
		// The same build again: nothing to do.
		if wrote, err := Install(dir, buildFS("A")); err != nil || wrote {
			t.Fatalf("second install: %v %v", wrote, err)
		}
	})
	t.Run("another build is replaced, stale files gone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ui")
		if _, err := Install(dir, buildFS("A")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "assets", "old-0.js"), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		wrote, err := Install(dir, buildFS("B"))
		if err != nil || !wrote {
			t.Fatalf("install: %v %v", wrote, err)
		}
		if read(t, dir, "index.html") != "B" {
			t.Fatal("not replaced")
		}
		if _, err := os.Stat(filepath.Join(dir, "assets", "old-0.js")); !os.IsNotExist(err) {
			t.Fatalf("stale asset kept: %v", err)
		}
		for _, p := range []string{dir + ".new", dir + ".old"} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Fatalf("%s left behind", p)
			}
		}
	})
	t.Run("a UI without a marker is another build's", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ui")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("hand"), 0o644); err != nil {
			t.Fatal(err)
		}
		if wrote, err := Install(dir, buildFS("A")); err != nil || !wrote || read(t, dir, "index.html") != "A" {
			t.Fatalf("install: %v %v", wrote, err)
		}
	})
	t.Run("a marker whose files are gone is written again", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ui")
		if _, err := Install(dir, buildFS("A")); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"index.html", "index.html.gz"} {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		if wrote, err := Install(dir, buildFS("A")); err != nil || !wrote || read(t, dir, "index.html") != "A" {
			t.Fatalf("install: %v %v", wrote, err)
		}
	})
	t.Run("no bundled UI leaves the partition alone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ui")
		if wrote, err := Install(dir, nil); err != nil || wrote {
			t.Fatalf("nil: %v %v", wrote, err)
		}
		if wrote, err := Install(dir, fstest.MapFS{"README": {Data: []byte("x")}}); err != nil || wrote {
			t.Fatalf("placeholder only: %v %v", wrote, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatal("partition created without a UI")
		}
	})
}

// Without the webui build tag the executable carries no UI: the partition is left alone, so
// the placeholder keeps being served.
func TestInstallBundledWithoutABuild(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ui")
	wrote, err := New(dir, nil).InstallBundled()
	if err != nil || wrote {
		t.Fatalf("install: %v %v", wrote, err)
	}
	if New(dir, nil).Available() {
		t.Fatal("a UI appeared")
	}
}
