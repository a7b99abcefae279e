//go:build !unix

package store

import (
	"fmt"
	"os"
)

// lockFile only creates the lock file where flock is unavailable; the device runs on Linux.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: open lock file: %w", err)
	}
	return f, nil
}

func unlockFile(f *os.File) { _ = f.Close() }
