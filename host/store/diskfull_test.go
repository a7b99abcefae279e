package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// grownStore leaves a store at path whose file holds dead records (so Open compacts it)
// and returns what it holds.
func grownStore(t *testing.T, path string) map[string]string {
	t.Helper()
	s := openT(t, path)
	for i := range 100 {
		if err := s.Set("k"+strconv.Itoa(i%10), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	want := dump(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// A full disk makes the compaction at open fail: the store opens anyway on its whole file,
// serves every value, says why it did not compact, and compacts once there is room.
func TestOpenOnAFullDisk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	want := grownStore(t, path)
	grown := fileSize(t, path)
	full := func(p string, _ []byte) error {
		return fmt.Errorf("store: write snapshot: %w", &os.PathError{Op: "write", Path: p, Err: syscall.ENOSPC})
	}
	s, err := openWith(path, full)
	if err != nil {
		t.Fatalf("Open on a full disk: %v", err)
	}
	defer s.Close()
	wantServedUncompacted(t, s, want)
	if size := fileSize(t, path); size != grown {
		t.Fatalf("file %d bytes, was %d: it was touched", size, grown)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("a partial snapshot was left: %v", err)
	}
	// Room again: the next compaction goes through and clears the reason.
	s.writeSnapshot = writeSynced
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactDeferred(); err != nil || fileSize(t, path) >= grown {
		t.Fatalf("after a compaction with room: deferred %v, %d bytes (was %d)", err, fileSize(t, path), grown)
	}
	if got := dump(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("values after compaction %v, want %v", got, want)
	}
}

// The same on a real full filesystem: a small tmpfs. It needs the right to mount (root) and
// skips without it.
func TestOpenOnARealFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	path := filepath.Join(mnt, "nvs")
	want := grownStore(t, path)
	// Fill what is left, so the snapshot finds no room.
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			break
		}
	}
	_ = f.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open on a full tmpfs: %v", err)
	}
	defer s.Close()
	wantServedUncompacted(t, s, want)
}

// wantServedUncompacted checks a store opened on a full disk: it serves every value of want and
// says the lack of space kept it from compacting.
func wantServedUncompacted(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	if err := s.CompactDeferred(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CompactDeferred = %v, want the lack of space", err)
	}
	if got := dump(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("values %v, want %v", got, want)
	}
}
