package config

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAwaitedNamespace: PUT /config naming a run-time namespace the device is still
// installing stays the spec's 400 validation with nothing written, but its message says whose
// namespace it is and to try again, and Retry-After says when; a namespace nobody awaits
// keeps the plain answer.
func TestAwaitedNamespace(t *testing.T) {
	f := newFixture(t)
	var installing atomic.Bool // read on the server's goroutines
	installing.Store(true)
	f.c.AwaitNamespaces(func(ns string) (string, bool) {
		if ns != "f_n2k" || !installing.Load() {
			return "", false
		}
		return "namespace f_n2k belongs to the bundled plugin n2k, still being installed; try again in a few seconds", true
	})
	srv := f.server(t)
	put := func(body string) reply {
		return do(t, http.MethodPut, srv.URL+"/api/v1/config", body, map[string]string{"Content-Type": "application/json"})
	}
	message := func(r reply) string {
		var e struct{ Message string }
		_ = json.Unmarshal(r.body, &e)
		return e.Message
	}
	before := f.stored(t)

	r := put(`{"httpd":{"port":8081},"f_n2k":{"enabled":true}}`)
	code, path := errBody(t, r)
	if r.status != http.StatusBadRequest || code != "validation" || path == nil || *path != "f_n2k" {
		t.Fatalf("awaited: %d %s", r.status, r.body)
	}
	if m := message(r); !strings.Contains(m, "bundled plugin n2k") || !strings.Contains(m, "try again") {
		t.Fatalf("awaited: message %q", m)
	}
	if ra := r.header.Get("Retry-After"); ra != "5" {
		t.Fatalf("awaited: Retry-After %q, want 5", ra)
	}
	if !sameStore(before, f.stored(t)) {
		t.Fatal("awaited: the store changed")
	}
	// GET /config?ns= of it stays 404 unknown_namespace, with the same explanation.
	r = do(t, http.MethodGet, srv.URL+"/api/v1/config?ns=f_n2k", "", nil)
	if code, _ := errBody(t, r); r.status != http.StatusNotFound || code != "unknown_namespace" ||
		!strings.Contains(message(r), "still being installed") || r.header.Get("Retry-After") != "5" {
		t.Fatalf("GET awaited: %d %s Retry-After %q", r.status, r.body, r.header.Get("Retry-After"))
	}

	for _, body := range []string{`{"f_other":{"x":1}}`, `{"f_n2k":{"enabled":true}}`} {
		if body == `{"f_n2k":{"enabled":true}}` {
			installing.Store(false) // the offer ended and the plugin did not register it
		}
		r := put(body)
		code, path := errBody(t, r)
		if r.status != http.StatusBadRequest || code != "validation" || path == nil || message(r) != "unknown namespace" {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		if ra := r.header.Get("Retry-After"); ra != "" {
			t.Fatalf("%s: Retry-After %q", body, ra)
		}
	}

	// Once registered, the namespace is the plugin's like any other.
	if err := f.c.Register(Namespace{Name: "f_n2k", Version: 1, Title: "NMEA 2000",
		Keys: []Key{{Name: "enabled", Type: TypeBool, Default: false}}}); err != nil {
		t.Fatal(err)
	}
	installing.Store(true)
	if r := put(`{"f_n2k":{"enabled":true}}`); r.status != http.StatusOK {
		t.Fatalf("registered: %d %s", r.status, r.body)
	}
}
