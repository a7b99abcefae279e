package config

import (
	"log/slog"
	"maps"
	"path/filepath"
	"testing"

	"devhost/host/api"
	"devhost/host/store"
	"devhost/host/testio"
)

// testNS exercises every type and descriptor feature.
func testNS() Namespace {
	return Namespace{
		Name: "t", Version: 1, Title: "Test", Description: "Every kind of key.",
		Keys: []Key{
			{Name: "b", Type: TypeBool, Default: false},
			{Name: "i", Type: TypeInt, Default: 5, Min: Float(0), Max: Float(10), RestartRequired: true, Unit: "s", Group: "Numbers"},
			{Name: "f", Type: TypeFloat, Default: 1.5, Min: Float(-2), Max: Float(2.5), X: &X{DisplayMultiplier: Float(57.29577951308232), DisplayOffset: Float(0)}},
			{Name: "big", Type: TypeInt, Default: 0},
			{Name: "s", Type: TypeString, Default: "abc", MaxLength: 8, Pattern: "^[a-z]*$"},
			{Name: "e", Type: TypeString, Default: "a", Enum: []string{"a", "bb", "ccc"}},
			{Name: "blob", Type: TypeBlob, MaxLength: 4},
			{Name: "sec", Type: TypeString, Default: "", MaxLength: 16, Secret: true},
			{Name: "secb", Type: TypeBlob, MaxLength: 8, Secret: true},
			{Name: "ro", Type: TypeInt, Default: 7, ReadOnly: true},
			{Name: "tab", Type: TypeString, X: &X{Format: FormatTable, Columns: []string{"name", "value"}}},
			{Name: "u", Type: TypeString, Default: ""},
		},
	}
}

type fixture struct {
	c    *Config
	st   *store.Store
	path string
	log  *testio.Buffer
}

func newFixture(t testing.TB, namespaces ...Namespace) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvs")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{st: st, path: path, log: &testio.Buffer{}}
	if namespaces == nil {
		namespaces = append(Builtin(), testNS())
	}
	f.c, err = New(st, debugLogger(f.log), namespaces...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// reopen builds a new Config over the same store, as a reboot would.
func (f *fixture) reopen(t *testing.T, namespaces ...Namespace) {
	t.Helper()
	var err error
	f.c, err = New(f.st, debugLogger(f.log), namespaces...)
	if err != nil {
		t.Fatal(err)
	}
}

// stored returns every configuration record of the store.
func (f *fixture) stored(t testing.TB) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := f.st.Scan(storePrefix, func(k, v string) bool { m[k] = v; return true }); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) put(t *testing.T, body string) Result {
	t.Helper()
	res, err := f.c.Apply([]byte(body))
	if err != nil {
		t.Fatalf("Apply(%s): %v", body, err)
	}
	return res
}

func (f *fixture) get(t *testing.T, ns, key string) any {
	t.Helper()
	v, err := f.c.Get(ns, key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sameStore(a, b map[string]string) bool { return maps.Equal(a, b) }

func pathOf(e *api.Error) string {
	if e.Path == nil {
		return "<nil>"
	}
	return *e.Path
}

// debugLogger logs every level as text into w, for assertions on the log.
func debugLogger(w *testio.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
