package main

import (
	"context"
	"crypto/rsa"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"devhost/abi"
	"devhost/host/httpd"
	"devhost/host/plugin"
)

// tinyModule is the smallest valid Wasm module: enough to pack, upload and store (the device
// in these tests never runs it).
var tinyModule = []byte("\x00asm\x01\x00\x00\x00")

const testManifest = `{"id":"demo","name":"Demo","version":"1.2.3","abi":1,"capabilities":["log","timer"]}`

// pluginDevice is a plugin host behind the device's HTTP server; plugins are stored and
// listed, never started.
func pluginDevice(t *testing.T, trusted *rsa.PublicKey) string {
	t.Helper()
	m, err := plugin.New(plugin.Options{Dir: t.TempDir(), TrustedKeys: []*rsa.PublicKey{trusted}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpd.New(httpd.Options{})
	if err := srv.HandleAll(m.Routes()); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL
}

func testKeyFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "host", "plugin", "testdata", "keys", "publisher.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readKey reads an existing key file as the signing commands do.
func readKey(t *testing.T, p string) *rsa.PrivateKey {
	t.Helper()
	k, created, err := loadOrCreateKey(p)
	if err != nil || created {
		t.Fatalf("key %s: created %v, %v", p, created, err)
	}
	return k
}

// verifiedBundle reads a bundle file that must verify with key.
func verifiedBundle(t *testing.T, path string, key *rsa.PrivateKey) *abi.Bundle {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := abi.Parse(b)
	if err != nil {
		t.Fatalf("bundle %s: %v", path, err)
	}
	if err := bd.Verify(&key.PublicKey); err != nil {
		t.Fatalf("bundle %s: %v", path, err)
	}
	return bd
}

// step is one command line and a part of what it must print.
type step struct {
	args []string
	want string
}

// runSteps runs the steps in order; each must succeed and print its want.
func runSteps(t *testing.T, h *harness, steps []step) {
	t.Helper()
	for _, s := range steps {
		h.stdout.Reset()
		if code := h.run(s.args...); code != exitOK {
			t.Fatalf("%v: %d %s", s.args, code, h.stderr)
		}
		if !strings.Contains(h.stdout.String(), s.want) {
			t.Fatalf("%v printed %q, want %q", s.args, h.stdout, s.want)
		}
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPluginAuthorPath(t *testing.T) {
	dir := t.TempDir()
	keyFile := testKeyFile(t)
	key := readKey(t, keyFile)
	kid, _ := abi.KeyID(&key.PublicKey)
	url := pluginDevice(t, &key.PublicKey)
	man := writeFile(t, dir, "manifest.json", []byte(testManifest))
	wasm := writeFile(t, dir, "demo.wasm", tinyModule)
	out := filepath.Join(dir, "demo.devplug")

	h := newHarness()
	h.env["DEVCTL_SIGN_KEY"] = keyFile
	if code := h.run("plugin", "pack", "--manifest", man, "--wasm", wasm, "--out", out); code != exitOK {
		t.Fatalf("pack: %d %s", code, h.stderr)
	}
	if id := verifiedBundle(t, out, key).Manifest.ID; id != "demo" {
		t.Fatalf("packed bundle of %q", id)
	}
	runSteps(t, h, []step{
		{[]string{"plugin", "install", "--url", url, "--grant", "log", out}, "installed demo 1.2.3"},
		{[]string{"plugin", "list", "--url", url}, "demo"},
		{[]string{"plugin", "stop", "--url", url, "demo"}, "demo "},
		{[]string{"plugin", "start", "--url", url, "demo"}, "demo "},
		{[]string{"plugin", "keys", "list", "--url", url}, kid + " built-in"},
		{[]string{"plugin", "install", "--url", url, "--grant-all", out}, "replaced demo"},
		{[]string{"plugin", "remove", "--url", url, "--purge-config", "demo"}, "demo removed with its configuration"},
	})
	if !strings.Contains(h.stderr.String(), "demo 1.2.3 verified") {
		t.Errorf("the upload's verification was not shown: %s", h.stderr)
	}
	if code := h.run("plugin", "start", "--url", url, "demo"); code != exitFail ||
		!strings.Contains(h.stderr.String(), "404 not_found") {
		t.Fatalf("start of a removed plugin: %d %s", code, h.stderr)
	}
}

func TestPluginRefusedAndKeys(t *testing.T) {
	dir := t.TempDir()
	key := readKey(t, testKeyFile(t))
	url := pluginDevice(t, &key.PublicKey)
	h := newHarness()
	h.env["DEVHOST_KEYS"] = filepath.Join(dir, "devkeys")
	// keygen creates the development key once.
	if code := h.run("plugin", "keygen"); code != exitOK {
		t.Fatalf("keygen: %d %s", code, h.stderr)
	}
	first := h.stdout.String()
	if !strings.HasPrefix(first, "key ") || !strings.Contains(first, "dev.key") {
		t.Fatalf("keygen printed %q", first)
	}
	h.stdout.Reset()
	h.run("plugin", "keygen")
	if h.stdout.String() != first {
		t.Fatalf("second keygen %q, first %q", h.stdout, first)
	}
	devPub := filepath.Join(dir, "devkeys", "dev.pub.pem")
	if _, err := os.Stat(devPub); err != nil {
		t.Fatal(err)
	}
	// A bundle signed with the development key is refused until the key is trusted.
	man := writeFile(t, dir, "manifest.json", []byte(testManifest))
	wasm := writeFile(t, dir, "demo.wasm", tinyModule)
	out := filepath.Join(dir, "demo.devplug")
	if code := h.run("plugin", "pack", "--manifest", man, "--wasm", wasm, "--out", out); code != exitOK {
		t.Fatalf("pack: %s", h.stderr)
	}
	if code := h.run("plugin", "install", "--url", url, out); code != exitFail || !strings.Contains(h.stderr.String(), "not in the trust store") {
		t.Fatalf("install with an untrusted key: %d %s", code, h.stderr)
	}
	if code := h.run("plugin", "keys", "add", "--url", url, devPub); code != exitOK {
		t.Fatalf("keys add: %s", h.stderr)
	}
	if code := h.run("plugin", "install", "--url", url, out); code != exitOK {
		t.Fatalf("install after trusting: %s", h.stderr)
	}
	// Re-signing with another key: sign writes a bundle the device verifies with that key.
	resigned := filepath.Join(dir, "resigned.devplug")
	if code := h.run("plugin", "sign", "--sign-key", testKeyFile(t), "--out", resigned, out); code != exitOK {
		t.Fatalf("sign: %s", h.stderr)
	}
	verifiedBundle(t, resigned, key)
	kid := strings.Fields(first)[1]
	if code := h.run("plugin", "keys", "remove", "--url", url, kid); code != exitOK {
		t.Fatalf("keys remove: %s", h.stderr)
	}
	// A key file of its own is created on first use, with its public half beside it.
	own := filepath.Join(dir, "own", "publisher.pem")
	h.stdout.Reset()
	if code := h.run("plugin", "keygen", "--sign-key", own); code != exitOK {
		t.Fatal(h.stderr)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("own key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "own", "publisher.pub.pem")); err != nil {
		t.Fatal(err)
	}
}

func TestPluginUsage(t *testing.T) {
	for _, args := range [][]string{
		{"plugin"},
		{"plugin", "bogus"},
		{"plugin", "pack", "--wasm", "x"},
		{"plugin", "install", "--url", "http://127.0.0.1:1"},
		{"plugin", "install", "--url", "http://127.0.0.1:1", "--grant", "log", "--grant-all", "x"},
		{"plugin", "start", "--url", "http://127.0.0.1:1"},
		{"plugin", "list", "extra"},
		{"plugin", "keys"},
		{"plugin", "keys", "frob", "--url", "http://127.0.0.1:1"},
	} {
		h := newHarness()
		if code := h.run(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	// A bare `devctl plugin` shows the plugin commands, not the top-level usage.
	h0 := newHarness()
	if code := h0.run("plugin"); code != exitUsage || !strings.Contains(h0.stderr.String(), "devctl plugin install") ||
		strings.Contains(h0.stderr.String(), "devctl board") {
		t.Errorf("bare plugin: exit %d, stderr %q", code, h0.stderr.String())
	}
	h := newHarness()
	if code := h.app.run(context.Background(), []string{"plugin", "help"}); code != exitOK || !strings.Contains(h.stdout.String(), "devctl plugin pack") {
		t.Fatal("plugin help")
	}
}
