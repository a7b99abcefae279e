package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"devhost/abi"
)

// The author's whole path out of the tree: a new project in a directory outside the
// repository, its native test against the fake host, a device build, and the bundle
// installed and run by a plugin host that trusts the signing key.
func TestPluginNewBuildInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a plugin for wasip1 and runs the project's own tests")
	}
	src, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my-probe")
	h := newHarness()
	h.env["DEVHOST_SRC"] = src
	if code := h.run("plugin", "new", dir); code != exitOK {
		t.Fatalf("new: %d %s", code, h.stderr)
	}
	for _, f := range []string{"go.mod", "main.go", "main_test.go", "manifest.json", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("new wrote no %s: %v", f, err)
		}
	}
	man, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if m, err := abi.ParseManifest(man); err != nil || m.ID != "my_probe" {
		t.Fatalf("manifest %s: %v", man, err)
	}
	// A second new into the same directory refuses to overwrite the author's work.
	if code := h.run("plugin", "new", dir); code != exitFail || !strings.Contains(h.stderr.String(), "not empty") {
		t.Fatalf("new over a project: %d %s", code, h.stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	test := exec.CommandContext(ctx, "go", "test", "-count=1", "./...")
	test.Dir = dir
	if out, err := test.CombinedOutput(); err != nil {
		t.Fatalf("the project's tests: %v\n%s", err, out)
	}

	keyFile := testKeyFile(t)
	key := readKey(t, keyFile)
	out := filepath.Join(t.TempDir(), "probe.devplug")
	h.stdout.Reset()
	if code := h.run("plugin", "build", dir, "--sign-key", keyFile, "--out", out); code != exitOK {
		t.Fatalf("build: %d %s", code, h.stderr)
	}
	if strings.TrimSpace(h.stdout.String()) != out {
		t.Fatalf("build printed %q", h.stdout)
	}
	if id := verifiedBundle(t, out, key).Manifest.ID; id != "my_probe" {
		t.Fatalf("built bundle of %q", id)
	}

	url := pluginDevice(t, &key.PublicKey)
	runSteps(t, h, []step{
		{[]string{"plugin", "install", "--url", url, "--grant-all", out}, "installed my_probe 0.1.0"},
		{[]string{"plugin", "list", "--url", url}, "my_probe"},
	})
}

func TestPluginNewRefusesABadID(t *testing.T) {
	h := newHarness()
	h.env["DEVHOST_SRC"] = filepath.Join("..", "..")
	if code := h.run("plugin", "new", filepath.Join(t.TempDir(), "Not-An-Id-Because-Long")); code != exitUsage {
		t.Fatalf("new with a bad id: %d %s", code, h.stderr)
	}
	if code := h.run("plugin", "new", t.TempDir(), "--id", "ok", "--src", t.TempDir()); code != exitFail ||
		!strings.Contains(h.stderr.String(), "no devhost checkout") {
		t.Fatalf("new without a checkout: %d %s", code, h.stderr)
	}
}
