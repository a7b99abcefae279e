package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed table is what the pinned schema package generates (installed by
// `make n2k-reference`; without it the check is skipped unless N2KREF_REQUIRED is set).
func TestCommittedTableIsCurrent(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", ".cache", "n2k", "ref", "node_modules", "@signalk", "signalk-schema")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("N2KREF_REQUIRED") != "" {
			t.Fatalf("the schema package is not installed: %v", err)
		}
		t.Skipf("the schema package is not installed (make n2k-reference): %v", err)
	}
	want, err := Generate(dir)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join("..", "units_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("units_gen.go is stale: run go generate ./plugins/n2k/skmeta")
	}
}
