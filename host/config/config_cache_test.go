package config

import (
	"path/filepath"
	"strings"
	"testing"

	"devhost/host/store"
)

// The rendered document is cached; every way the stored values or the set of namespaces can
// change must show in the next read.
func TestDocumentCacheFollowsEveryChange(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ns := Namespace{Name: "cache", Version: 1, Title: "Cache", Keys: []Key{{Name: "n", Type: "int", Default: 1}}}
	c, err := New(st, nil, ns)
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := c.Document("")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(); !strings.Contains(got, `"n":1`) {
		t.Fatalf("initial %s", got)
	}
	steps := []struct {
		name string
		do   func() error
		want string
	}{
		{"Apply", func() error { _, err := c.Apply([]byte(`{"cache":{"n":2}}`)); return err }, `"n":2`},
		{"Set", func() error { return c.Set("cache", "n", 3) }, `"n":3`},
		{"null reset", func() error { _, err := c.Apply([]byte(`{"cache":{"n":null}}`)); return err }, `"n":1`},
		{"Register", func() error {
			return c.Register(Namespace{Name: "f_rt", Version: 1, Title: "RT", Keys: []Key{{Name: "b", Type: "bool", Default: true}}})
		}, `"f_rt":{"b":true}`},
		{"write to the run-time namespace", func() error { _, err := c.Apply([]byte(`{"f_rt":{"b":false}}`)); return err }, `"f_rt":{"b":false}`},
	}
	for _, s := range steps {
		read() // warm the cache
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := read(); !strings.Contains(got, s.want) {
			t.Fatalf("after %s: %s lacks %s", s.name, got, s.want)
		}
	}
	read()
	if err := c.Unregister("f_rt"); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Contains(got, "f_rt") {
		t.Fatalf("after Unregister: %s", got)
	}
}
