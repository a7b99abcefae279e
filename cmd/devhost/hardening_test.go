package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// --port serves another port for one run without changing the stored httpd.port, and says so.
func TestPortFlagForOneRun(t *testing.T) {
	d := newDev(t)
	stored := d.port
	d.powerCut()
	other := freePort(t)
	d.args = append(d.args, "--port", strconv.Itoa(other))
	d.powerOn()
	if want := fmt.Sprintf("http://127.0.0.1:%d", other); d.base != want {
		t.Fatalf("serving %s, want %s", d.base, want)
	}
	if !strings.Contains(d.out.String(), fmt.Sprintf("port %d from --port for this run; the stored httpd.port (%d) is unchanged", other, stored)) {
		t.Errorf("the override was not said:\n%s", d.out.String())
	}
	if got := d.config("httpd")["port"]; got != float64(stored) {
		t.Errorf("stored httpd.port %v, want %d", got, stored)
	}
	d.powerCut()
	d.port = other
	d.waitPortFree()
	d.args = d.args[:len(d.args)-2]
	d.port = stored
	d.powerOn()
	if want := fmt.Sprintf("http://127.0.0.1:%d", stored); d.base != want {
		t.Fatalf("without --port serving %s, want %s", d.base, want)
	}
}

// withFullableFlash puts the flash on a tmpfs of its own with room for the executable (the
// bootloader copies it into ota_0) and 8 MiB more, so that a test can fill it; it skips the
// test where mounting is not allowed (it needs root).
func withFullableFlash(t *testing.T) devOpt {
	return func(d *dev) {
		exe, err := os.Stat(binary)
		if err != nil {
			t.Fatal(err)
		}
		flash := filepath.Join(d.data, "flash")
		if err := os.MkdirAll(flash, 0o755); err != nil {
			t.Fatal(err)
		}
		size := fmt.Sprintf("size=%dk", exe.Size()/1024+8<<10)
		if err := syscall.Mount("tmpfs", flash, "tmpfs", 0, size); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(flash, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", flash, err)
			}
		})
	}
}

// fill writes into dir until the filesystem is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			return
		}
	}
}

// A device whose flash is full boots, raises storageFull, and serves what it stored.
func TestBootOnAFullDataDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("black-box")
	}
	d := newDev(t, withFullableFlash(t))
	for i := range 20 { // dead records for the compaction at the next open
		body := fmt.Sprintf(`{"sk":{"batch_ms":%d}}`, 100+i)
		d.putConfig(body)
	}
	d.powerCut()
	fill(t, filepath.Join(d.data, "flash"))
	d.powerOn()
	c := d.condition("storageFull")
	if c == nil {
		t.Errorf("no storageFull condition in GET /health")
	} else if msg := fmt.Sprint(c["message"]); c["state"] != "warn" || !strings.Contains(msg, "no space left on device") || strings.Contains(msg, d.data) {
		t.Errorf("storageFull %v", c)
	}
	if got := d.config("sk")["batch_ms"]; got != float64(119) {
		t.Errorf("sk.batch_ms %v after the boot, want 119", got)
	}
}
