package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"devhost/abi"
	"devhost/host/ota"
	"devhost/host/ota/image"
)

func TestOTAManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "abi", "testdata", "publisher.pem"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := abi.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []string
	for _, v := range []string{"1.0.0", "1.1.0-rc.1"} {
		var img bytes.Buffer
		exe := []byte("exe " + v)
		h := image.Header{Project: "devhost", Version: v, Target: "esp32s3", BuildTime: "2026-01-02T03:04:05Z"}
		if err := image.Pack(&img, h, bytes.NewReader(exe), int64(len(exe)), k); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "devhost-"+v+".img")
		if err := os.WriteFile(p, img.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	h := newHarness()
	if code := h.run(append([]string{"ota", "manifest", "--base-url", "http://127.0.0.1:8000/fw"}, files...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	base, _ := url.Parse("http://127.0.0.1:8000/fw/manifest.json")
	m, err := ota.ParseManifest([]byte(h.stdout.String()), base)
	if err != nil {
		t.Fatalf("%v\n%s", err, h.stdout.String())
	}
	if m.Schema != 1 || m.App != "devhost" || len(m.Builds) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	b0 := m.Builds[0]
	if b0.Version != "1.0.0" || b0.Target != "esp32s3" || b0.Channel != "stable" || b0.URL != "http://127.0.0.1:8000/fw/devhost-1.0.0.img" ||
		b0.Size == 0 || len(b0.SHA256) != 64 || b0.Date != "2026-01-02T03:04:05Z" {
		t.Fatalf("build %+v", b0)
	}
	// A file that is not an image is refused.
	bad := filepath.Join(dir, "notes.txt")
	_ = os.WriteFile(bad, []byte("hello"), 0o644)
	if code := newHarness().run("ota", "manifest", "--base-url", "http://127.0.0.1/fw", bad); code != exitFail {
		t.Fatalf("non-image: exit %d", code)
	}
	if code := newHarness().run("ota", "manifest", files[0]); code != exitUsage {
		t.Fatalf("no base url: exit %d", code)
	}
}

func TestOTAPackRefusesWithoutImage(t *testing.T) {
	if code := newHarness().run("ota", "pack", "--out", filepath.Join(t.TempDir(), "x.img")); code != exitUsage {
		t.Fatalf("exit %d", code)
	}
	if code := newHarness().run("ota", "push", "--url", "http://127.0.0.1:1"); code != exitUsage {
		t.Fatalf("push without a file: exit %d", code)
	}
}
