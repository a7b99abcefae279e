package sktls

import (
	"devhost/host/signalk/sktest/testcert"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestDocumentShape: GET /sk/tls shows the pinned identity beside the presented one with every
// member, and the routes are the three of the spec.
func TestDocumentShape(t *testing.T) {
	r := newRig(t)
	ca := testcert.NewCA(t, "Boat CA")
	srv := r.firstUse(t, ca)
	var rt http.HandlerFunc
	var paths []string
	for _, x := range r.m.Routes() {
		paths = append(paths, x.Method+" "+x.Path)
		if x.Method == http.MethodGet {
			rt = x.Handler
		}
	}
	if want := []string{"GET /sk/tls", "DELETE /sk/tls", "PUT /sk/tls/ca"}; !slices.Equal(paths, want) {
		t.Fatalf("routes %v", paths)
	}
	rec := httptest.NewRecorder()
	rt(rec, httptest.NewRequest(http.MethodGet, "/sk/tls", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET = %d %v", rec.Code, rec.Header())
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"server", "mode", "state", "anchor", "pinned", "presented", "cas", "error"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("document lacks %q: %s", k, rec.Body)
		}
	}
	var pinned, presented map[string]any
	_ = json.Unmarshal(doc["pinned"], &pinned)
	_ = json.Unmarshal(doc["presented"], &presented)
	for _, k := range []string{"kind", "subject", "issuer", "sans", "not_before", "not_after", "sha256", "is_ca", "names", "pinned_at"} {
		if _, ok := pinned[k]; !ok {
			t.Errorf("pinned lacks %q", k)
		}
	}
	for _, k := range []string{"subject", "issuer", "sans", "not_before", "not_after", "sha256", "ca", "chain_length", "seen_at"} {
		if _, ok := presented[k]; !ok {
			t.Errorf("presented lacks %q", k)
		}
	}
	d := r.m.Document()
	if d.Server != srv.Addr() || d.Mode != ModeTOFU || d.State != StateTrusted || *d.Anchor != KindCA {
		t.Fatalf("%+v", d)
	}
	if d.Pinned.SHA256 != fingerprint(ca.Cert) || !slices.Equal(d.Pinned.Names, []string{"127.0.0.1", "localhost", "sk.local"}) || !d.Pinned.IsCA {
		t.Fatalf("pinned %+v", d.Pinned)
	}
	if d.Presented.CA == nil || d.Presented.CA.SHA256 != fingerprint(ca.Cert) || d.Presented.ChainLength != 2 || !strings.Contains(d.Presented.Issuer, "Boat CA") {
		t.Fatalf("presented %+v", d.Presented)
	}
	if d.Presented.NotBefore.Location().String() != "UTC" {
		t.Fatal("times not UTC")
	}

	// Before any server: an empty but complete document.
	r2 := newRig(t)
	e := r2.m.Document()
	if e.Server != "" || e.State != StateNone || e.Anchor != nil || e.Pinned != nil || e.Presented != nil || e.CAs == nil {
		t.Fatalf("empty document %+v", e)
	}
}

// TestEvents: sk_tls goes out with the document when the pin or the judgement changes, and
// not for a repeat of the same trusted connection.
func TestEvents(t *testing.T) {
	r := newRig(t)
	ca := testcert.NewCA(t, "CA")
	srv := newTLSServer(t, ca.Issue(t, testcert.Loopback), nil)
	if ev := r.m.SnapshotEvent(); ev.Name != "sk_tls" {
		t.Fatalf("snapshot %q", ev.Name)
	} else if _, ok := ev.Data.(Document); !ok {
		t.Fatalf("snapshot data %T", ev.Data)
	}

	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	if e := r.lastEvent(); e.Pinned == nil || e.State != StateTrusted {
		t.Fatalf("after commit: %+v", e)
	}
	n := r.eventCount()
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatal(err)
	}
	if r.eventCount() != n {
		t.Fatal("a repeated trusted connection published")
	}

	srv.set(testcert.NewCA(t, "Other").Issue(t, testcert.Loopback))
	_ = r.get(t, srv.Addr())
	if e := r.lastEvent(); e.State != StateMismatch || e.Presented == nil {
		t.Fatalf("after refusal: %+v", e)
	}
	if err := r.m.Forget(); err != nil {
		t.Fatal(err)
	}
	if e := r.lastEvent(); e.Pinned != nil || e.State != StateNone {
		t.Fatalf("after DELETE: %+v", e)
	}
	n = r.eventCount()
	if rec := putCA(r.m, `{"pem":`+jsonString(pemOf(ca.Cert))+`}`); rec.Code != http.StatusOK {
		t.Fatal(rec.Body)
	}
	if r.eventCount() != n+1 || len(r.lastEvent().CAs) != 1 {
		t.Fatal("PUT /sk/tls/ca did not publish the new CA")
	}
	n = r.eventCount()
	retries := r.retries.Load()
	r.cfg.Set("sk", "tls_trust", ModeBundle)
	if r.eventCount() != n+1 || r.lastEvent().Mode != ModeBundle || r.retries.Load() != retries+1 {
		t.Fatal("a trust mode change did not publish and retry")
	}
	n = r.eventCount()
	r.cfg.Set("sk", "batch_ms", "5")
	if r.eventCount() != n {
		t.Fatal("an unrelated key published")
	}
}
