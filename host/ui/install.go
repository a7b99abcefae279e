package ui

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// BuildMarker is the file in the partition naming the build its UI came from (a hash of the
// files), so a device carrying another UI knows to replace it.
const BuildMarker = ".build-id"

// InstallBundled writes the UI this executable carries into the partition (see Install).
func (u *UI) InstallBundled() (bool, error) {
	src, err := Bundled()
	if err != nil {
		return false, err
	}
	return Install(u.dir, src)
}

// Install writes the UI files of src into the partition dir when the partition holds no UI or
// another build's (its BuildMarker is missing or differs), and reports whether it wrote. A src
// without an index.html (nil, or a build without a UI) leaves the partition alone.
//
// The new files are written beside the partition and swapped in with two renames, so a power
// cut leaves either the old UI, the new one, or no partition (written again at the next boot).
func Install(dir string, src fs.FS) (bool, error) {
	if src == nil || !hasIndex(src) {
		return false, nil
	}
	id, err := buildID(src)
	if err != nil {
		return false, err
	}
	staging, old := dir+".new", dir+".old"
	for _, p := range []string{staging, old} {
		if err := os.RemoveAll(p); err != nil {
			return false, fmt.Errorf("ui install: clear %s: %w", p, err)
		}
	}
	if have, err := os.ReadFile(filepath.Join(dir, BuildMarker)); err == nil && string(have) == id && New(dir, nil).Available() {
		return false, nil
	}
	if err := copyTree(src, staging); err != nil {
		_ = os.RemoveAll(staging)
		return false, fmt.Errorf("ui install: %w", err)
	}
	if err := os.WriteFile(filepath.Join(staging, BuildMarker), []byte(id), 0o644); err != nil {
		_ = os.RemoveAll(staging)
		return false, fmt.Errorf("ui install: marker: %w", err)
	}
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = os.RemoveAll(staging)
		return false, fmt.Errorf("ui install: move old partition: %w", err)
	}
	if err := os.Rename(staging, dir); err != nil {
		return false, fmt.Errorf("ui install: move new partition: %w", err)
	}
	if err := os.RemoveAll(old); err != nil {
		return true, fmt.Errorf("ui install: remove old partition: %w", err)
	}
	return true, nil
}

func hasIndex(src fs.FS) bool {
	for _, name := range []string{indexName, indexName + ".gz"} {
		if fi, err := fs.Stat(src, name); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// buildID hashes every file's name, size and content in walk (lexical) order.
func buildID(src fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := fs.ReadFile(src, name)
		if err != nil {
			return err
		}
		_, _ = io.WriteString(h, name+"\x00"+strconv.Itoa(len(b))+"\x00")
		_, _ = h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("ui build id: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}

func copyTree(src fs.FS, dst string) error {
	return fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dst, filepath.FromSlash(name))
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			b, err := fs.ReadFile(src, name)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
		return nil
	})
}
