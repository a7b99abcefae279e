package config

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
)

func plugNS(name string) Namespace {
	return Namespace{Name: name, Version: 1, Title: "Plugin " + name,
		Keys: []Key{{Name: "rate", Type: TypeFloat, Default: 1.0, Min: Float(0), Max: Float(10), Unit: "Hz"}}}
}

func schemaNS(t *testing.T, c *Config, ns string) map[string]any {
	t.Helper()
	body, _ := c.Schema()
	var s map[string]any
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	n, _ := s["properties"].(map[string]any)[ns].(map[string]any)
	return n
}

func TestRuntimeNamespaces(t *testing.T) {
	f := newFixture(t)
	etags := map[string]bool{}
	etag := func() string {
		t.Helper()
		_, e := f.c.Schema()
		if len(e) < 3 || e[0] != '"' || e[len(e)-1] != '"' {
			t.Fatalf("ETag %q is not a strong quoted tag", e)
		}
		if etags[e] {
			t.Fatalf("ETag %q repeated", e)
		}
		etags[e] = true
		return e
	}
	etag()
	if s := schemaNS(t, f.c, "httpd"); s["x-dev-runtime"] != nil {
		t.Fatal("a built-in namespace is marked run-time")
	}

	if err := f.c.Register(plugNS("f_log")); err != nil {
		t.Fatal(err)
	}
	etag()
	s := schemaNS(t, f.c, "f_log")
	if s == nil || s["x-dev-runtime"] != true || s["x-dev-version"] != float64(1) {
		t.Fatalf("schema of the run-time namespace: %v", s)
	}
	if _, has := mustDoc(t, f.c)["f_log"]; !has {
		t.Fatal("run-time namespace missing from GET /config")
	}
	f.put(t, `{"f_log":{"rate":2.5}}`)
	if v, _, _ := f.st.Get(storeKey("f_log", VersionKey)); v != "1" {
		t.Fatalf("run-time namespace not stamped: %q", v)
	}

	if err := f.c.Register(plugNS("f_log")); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate Register = %v", err)
	}
	if err := f.c.Register(plugNS("httpd")); !errors.Is(err, ErrExists) {
		t.Fatalf("Register over a built-in = %v", err)
	}
	bad := plugNS("f_bad")
	bad.Keys[0].Default = 11.0
	if err := f.c.Register(bad); err == nil {
		t.Fatal("malformed descriptor registered")
	}

	if err := f.c.Unregister("f_log"); err != nil {
		t.Fatal(err)
	}
	etag()
	if schemaNS(t, f.c, "f_log") != nil {
		t.Fatal("unregistered namespace still in the schema")
	}
	if _, err := f.c.Apply([]byte(`{"f_log":{"rate":1}}`)); err == nil {
		t.Fatal("PUT to an unregistered namespace accepted")
	}
	if err := f.c.Unregister("f_log"); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("second Unregister = %v", err)
	}
	if err := f.c.Unregister("httpd"); !errors.Is(err, ErrNotRuntime) {
		t.Fatalf("Unregister of a built-in = %v", err)
	}

	// Values survive until Purge.
	if err := f.c.Register(plugNS("f_log")); err != nil {
		t.Fatal(err)
	}
	etag() // same content as two steps ago, still a new ETag
	if got := f.c.Float("f_log", "rate"); got != 2.5 {
		t.Fatalf("value lost across unregister: %v", got)
	}
	if err := f.c.Purge("f_log"); !errors.Is(err, ErrRegistered) {
		t.Fatalf("Purge of a registered namespace = %v", err)
	}
	_ = f.c.Unregister("f_log")
	etag()
	if err := f.c.Purge("f_log"); err != nil {
		t.Fatal(err)
	}
	for k := range f.stored(t) {
		if len(k) > 10 && k[:10] == "cfg/f_log/" {
			t.Fatalf("Purge left %s", k)
		}
	}
	_ = f.c.Register(plugNS("f_log"))
	if got := f.c.Float("f_log", "rate"); got != 1.0 {
		t.Fatalf("purged value came back: %v", got)
	}
}

// TestConcurrentUse runs writers, readers and run-time registrations at once (meaningful
// under -race): every write lands and the document stays well-formed.
func TestConcurrentUse(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := f.c.Set("t", "i", (w+i)%10); err != nil {
					t.Error(err)
					return
				}
				if _, err := f.c.Apply([]byte(`{"t":{"u":"w` + strconv.Itoa(w) + `"}}`)); err != nil {
					t.Error(err)
					return
				}
				doc, _ := f.c.Document("")
				if !json.Valid(doc) {
					t.Error("document not JSON under concurrency")
					return
				}
				_, _ = f.c.Schema()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			name := "f_c" + strconv.Itoa(i%3)
			_ = f.c.Register(plugNS(name))
			_ = f.c.Unregister(name)
		}
	}()
	wg.Wait()
	if u := f.c.String("t", "u"); len(u) != 2 || u[0] != 'w' {
		t.Fatalf("t.u = %q", u)
	}
}
