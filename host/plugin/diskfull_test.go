package plugin

import (
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullDisk is a chunk file on a disk with no room left.
type fullDisk struct{ path string }

func (f fullDisk) WriteAt([]byte, int64) (int, error) {
	return 0, &os.PathError{Op: "write", Path: f.path, Err: syscall.ENOSPC}
}
func (fullDisk) Close() error { return nil }

// checkWriteFailed asserts the answer to a storage failure: 500 write_failed, the reason,
// and no path inside the device.
func checkWriteFailed(t *testing.T, code int, body []byte, paths ...string) {
	t.Helper()
	if code != http.StatusInternalServerError {
		t.Fatalf("answered %d %s, want 500", code, body)
	}
	e := decode[struct{ Error, Message string }](t, body)
	if e.Error != "write_failed" || !strings.Contains(e.Message, "no space left on device") {
		t.Errorf("body %s, want write_failed naming the lack of space", body)
	}
	for _, p := range paths {
		if strings.Contains(string(body), p) {
			t.Errorf("body %s shows the internal path %s", body, p)
		}
	}
	if strings.Contains(string(body), ".uploads") || strings.Contains(string(body), "/tmp") {
		t.Errorf("body %s shows an internal path", body)
	}
}

func openUpload(t *testing.T, h *harness, size int) string {
	t.Helper()
	code, body := h.do(http.MethodPost, "/plugins/uploads", map[string]any{"size": size})
	if code != http.StatusCreated {
		t.Fatalf("open an upload: %d %s", code, body)
	}
	return decode[struct{ ID string }](t, body).ID
}

// A chunk the disk cannot take is the device's failure, not the client's.
func TestUploadOnAFullDiskIsWriteFailed(t *testing.T) {
	h := newHarness(t)
	h.run()
	id := openUpload(t, h, 100)
	h.m.uploads.open = func(path string) (chunkFile, error) { return fullDisk{path}, nil }
	code, body := h.do(http.MethodPut, "/plugins/uploads/"+id, map[string]any{"offset": 0, "data": base64.StdEncoding.EncodeToString(make([]byte, 10))})
	checkWriteFailed(t, code, body, h.dir)
	// Nothing was counted: once there is room again the same chunk goes in.
	h.m.uploads.open = func(path string) (chunkFile, error) { return os.OpenFile(path, os.O_WRONLY, 0) }
	code, body = h.do(http.MethodPut, "/plugins/uploads/"+id, map[string]any{"offset": 0, "data": base64.StdEncoding.EncodeToString(make([]byte, 10))})
	if code != http.StatusOK || decode[struct{ Received int }](t, body).Received != 10 {
		t.Fatalf("the chunk after the disk recovered: %d %s", code, body)
	}
}

// The same on a real filesystem that is full: a 64 KiB tmpfs as the plugins partition.
// It needs the right to mount (root) and skips without it.
func TestUploadOnARealFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "plugins")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	h := newHarness(t, func(o *Options) { o.Dir = mnt })
	h.run()
	// Fill the partition beside the upload area.
	filler := filepath.Join(mnt, "filler")
	if err := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k", "count=64").Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) { // dd stops with an error once the disk is full: expected
			t.Fatal(err)
		}
	}
	id := openUpload(t, h, 12000)
	code, body := h.do(http.MethodPut, "/plugins/uploads/"+id, map[string]any{"offset": 0, "data": base64.StdEncoding.EncodeToString(make([]byte, 12000))})
	checkWriteFailed(t, code, body, mnt)
}
