// Package otatest holds what the tests of the OTA packages share: the repository's test signing
// keys (abi/testdata), found from this file's own place so that any package's tests can load
// them whatever their working directory.
package otatest

import (
	"crypto/rsa"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"devhost/abi"
)

// Key loads the test publisher key abi/testdata/<name>.pem ("publisher" or "other").
func Key(t testing.TB, name string) *rsa.PrivateKey {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("otatest: no source path to find abi/testdata from")
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "..", "abi", "testdata", name+".pem"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := abi.ParsePrivateKey(b)
	if err != nil {
		t.Fatalf("test key %s: %v", name, err)
	}
	return k
}
