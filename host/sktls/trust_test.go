package sktls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"devhost/host/signalk/sktest/testcert"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTOFUCAAnchor: a chain with a CA and a leaf with names pins the CA and the names; a
// renewal by the same CA for the same names is accepted without touching the pin; a leaf for
// other names or from another CA is refused as cert_error.
func TestTOFUCAAnchor(t *testing.T) {
	r := newRig(t)
	ca1 := testcert.NewCA(t, "Boat CA")
	srv := r.firstUse(t, ca1)
	pin := r.wantPin(t, "first use after an HTTP status", srv.Addr(), KindCA, ca1.Cert)
	if want := []string{"127.0.0.1", "localhost", "sk.local"}; !slices.Equal(pin.SANs, want) {
		t.Fatalf("pinned names %v, want %v", pin.SANs, want)
	}
	raw, _, _ := r.st.Get(PinPrefix + srv.Addr())

	// Renewal: a new key and serial from the same CA for the same names, in another order.
	srv.set(ca1.Issue(t, testcert.Leaf{DNS: []string{"SK.local.", "localhost"}, IPs: []string{"127.0.0.1"}, NotBefore: time.Now()}))
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("renewal refused: %v", err)
	}
	if raw2, _, _ := r.st.Get(PinPrefix + srv.Addr()); raw2 != raw {
		t.Fatal("a renewal rewrote the pin")
	}
	if d := r.m.Document(); d.State != StateTrusted || d.Pinned == nil || d.Pinned.Kind != KindCA {
		t.Fatalf("document after renewal: %+v", d)
	}

	cases := []struct {
		name string
		cert tls.Certificate
	}{
		{"same CA, other names", ca1.Issue(t, testcert.Leaf{DNS: []string{"other.local"}, IPs: []string{"127.0.0.1"}})},
		{"same CA, a name dropped", ca1.Issue(t, testcert.Leaf{DNS: []string{"localhost"}, IPs: []string{"127.0.0.1"}})},
		{"other CA, same names", testcert.NewCA(t, "Boat CA").Issue(t, testcert.Loopback)},
		{"self-signed, same names", testcert.SelfSigned(t, testcert.Loopback)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.set(tc.cert)
			hits := srv.hits.Load()
			err := r.get(t, srv.Addr())
			if got := certErrReason(t, err); got != ReasonMismatch {
				t.Fatalf("reason %q, want mismatch", got)
			}
			if !IsCertError(err) {
				t.Fatal("IsCertError false through net/http")
			}
			if srv.hits.Load() != hits {
				t.Fatal("a request reached the server over a refused connection")
			}
			if raw2, _, _ := r.st.Get(PinPrefix + srv.Addr()); raw2 != raw {
				t.Fatal("a refused certificate changed the pin")
			}
			d := r.m.Document()
			if d.State != StateMismatch || d.Error == "" || d.Presented == nil || d.Presented.SHA256 != fingerprint(tc.cert.Leaf) {
				t.Fatalf("document: state %q error %q presented %+v", d.State, d.Error, d.Presented)
			}
			if d.Pinned == nil || d.Pinned.SHA256 != fingerprint(ca1.Cert) {
				t.Fatalf("pinned identity changed: %+v", d.Pinned)
			}
		})
	}

	// The server renews back to a leaf of the pinned CA: the refusal clears by itself.
	srv.set(ca1.Issue(t, testcert.Loopback))
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("matching renewal after a mismatch: %v", err)
	}
	if d := r.m.Document(); d.State != StateTrusted || d.Error != "" {
		t.Fatalf("state %q error %q after the match", d.State, d.Error)
	}
}

// TestTOFULeafAnchor: a chain without a CA, or a leaf without names, pins the leaf itself; any
// replacement, even by the same CA, needs DELETE /sk/tls, after which the next use re-pins.
func TestTOFULeafAnchor(t *testing.T) {
	ca := testcert.NewCA(t, "Boat CA")
	cases := []struct {
		name    string
		first   func() tls.Certificate
		replace func() tls.Certificate
	}{
		{"self-signed without SAN", func() tls.Certificate { return testcert.SelfSigned(t, testcert.Leaf{CN: "signalk"}) },
			func() tls.Certificate { return testcert.SelfSigned(t, testcert.Leaf{CN: "signalk"}) }},
		{"self-signed with SAN", func() tls.Certificate { return testcert.SelfSigned(t, testcert.Loopback) },
			func() tls.Certificate { return testcert.SelfSigned(t, testcert.Loopback) }},
		{"CA-signed leaf sent without its CA", func() tls.Certificate {
			o := testcert.Loopback
			o.NoChain = true
			return ca.Issue(t, o)
		}, func() tls.Certificate {
			o := testcert.Loopback
			o.NoChain = true
			return ca.Issue(t, o)
		}},
		{"CA-signed leaf without SAN", func() tls.Certificate { return ca.Issue(t, testcert.Leaf{CN: "signalk"}) },
			func() tls.Certificate { return ca.Issue(t, testcert.Leaf{CN: "signalk"}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			first := tc.first()
			srv := newTLSServer(t, first, nil)
			if err := r.get(t, srv.Addr()); err != nil {
				t.Fatalf("first use: %v", err)
			}
			r.wantPin(t, "first use", srv.Addr(), KindLeaf, first.Leaf)
			if err := r.get(t, srv.Addr()); err != nil {
				t.Fatalf("same leaf again: %v", err)
			}
			second := tc.replace()
			srv.set(second)
			if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonMismatch {
				t.Fatalf("reason %q", got)
			}

			retries := r.retries.Load()
			rec := httptest.NewRecorder()
			r.m.handleDelete(rec, httptest.NewRequest(http.MethodDelete, "/sk/tls", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("DELETE = %d %s", rec.Code, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), `"pinned":null`) || !strings.Contains(rec.Body.String(), `"state":"none"`) {
				t.Fatalf("DELETE body %s", rec.Body)
			}
			r.wantRetry(t, "DELETE", retries)
			if _, ok := r.storedPin(t, srv.Addr()); ok {
				t.Fatal("DELETE left the pin stored")
			}
			if err := r.get(t, srv.Addr()); err != nil {
				t.Fatalf("after DELETE: %v", err)
			}
			r.wantPin(t, "the replacement after DELETE", srv.Addr(), "", second.Leaf)
		})
	}
}

// TestCommitOnlyAfterProof: a handshake alone commits nothing; a connection that never gets
// an HTTP status commits nothing (and a restart forgets it); a proof for one leaf does not
// commit another connection's capture.
func TestCommitOnlyAfterProof(t *testing.T) {
	r := newRig(t)
	ca := testcert.NewCA(t, "Boat CA")
	cert := ca.Issue(t, testcert.Loopback)

	// A server that completes the handshake and then hangs up without an HTTP answer.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	acceptAll(t, ln, func(c net.Conn) {
		_ = c.(*tls.Conn).Handshake()
		_ = c.Close()
	})
	addr := ln.Addr().String()
	if err := r.get(t, addr); err == nil || IsCertError(err) {
		t.Fatalf("request to a hanging-up server: %v", err)
	}
	if d := r.m.Document(); d.State != StatePending || d.Presented == nil {
		t.Fatalf("state %q after an unproven handshake", d.State)
	}
	if _, ok := r.storedPin(t, addr); ok {
		t.Fatal("committed without an HTTP status")
	}
	// Restart: nothing survived.
	r.m = r.build(t)
	if d := r.m.Document(); d.Pinned != nil {
		t.Fatal("an unproven capture survived a restart")
	}

	// Two first-use connections with different leaves; only the proven one is committed.
	c1, err := r.m.DialTLSContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	other := ca.Issue(t, testcert.Leaf{DNS: []string{"x.local"}})
	if err := r.m.ProvenConn(addr, &fakeStateConn{cs: tls.ConnectionState{PeerCertificates: []*x509.Certificate{other.Leaf}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.storedPin(t, addr); ok {
		t.Fatal("a proof for another leaf committed the capture")
	}
	if err := r.m.ProvenConn(addr, c1); err != nil {
		t.Fatal(err)
	}
	pin, ok := r.storedPin(t, addr)
	if !ok || pin.Kind != KindCA {
		t.Fatal("ProvenConn did not commit the connection's capture")
	}
	// A second proof of the same connection is a no-op.
	n := r.eventCount()
	if err := r.m.ProvenConn(addr, c1); err != nil || r.eventCount() != n {
		t.Fatalf("second proof: %v, events %d -> %d", err, n, r.eventCount())
	}
}

type fakeStateConn struct {
	net.Conn
	cs tls.ConnectionState
}

func (f *fakeStateConn) ConnectionState() tls.ConnectionState { return f.cs }

// TestStaleCaptureNotCommitted: a capture judged before another one was committed (two
// first-use connections racing with different leaves) cannot overwrite the committed pin.
func TestStaleCaptureNotCommitted(t *testing.T) {
	r := newRig(t)
	a := testcert.SelfSigned(t, testcert.Loopback)
	b := testcert.SelfSigned(t, testcert.Loopback)
	srv := newTLSServer(t, a, nil)
	ca, err := r.m.DialTLSContext(context.Background(), "tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	srv.set(b)
	cb, err := r.m.DialTLSContext(context.Background(), "tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := r.m.ProvenConn(srv.Addr(), cb); err != nil {
		t.Fatal(err)
	}
	if err := r.m.ProvenConn(srv.Addr(), ca); err != nil {
		t.Fatal(err)
	}
	r.wantPin(t, "the committed pin, not the stale capture", srv.Addr(), "", b.Leaf)
}

// TestCAMode: sk.ca_pem and PUT /sk/tls/ca anchor CAs; names are not checked; nothing is
// pinned; a chain from another CA or no CA at all is cert_error.
func TestCAMode(t *testing.T) {
	r := newRig(t)
	r.cfg.Set("sk", "tls_trust", ModeCA)
	ca1, ca2 := testcert.NewCA(t, "Config CA"), testcert.NewCA(t, "Operator CA")
	srv := newTLSServer(t, ca1.Issue(t, testcert.Leaf{DNS: []string{"not-this-host.example"}}), nil)

	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonNoAnchor {
		t.Fatalf("no CA: reason %q", got)
	}
	retries := r.retries.Load()
	r.cfg.Set("sk", "ca_pem", []byte(pemOf(ca1.Cert)))
	r.wantRetry(t, "a new sk.ca_pem", retries)
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("leaf of sk.ca_pem's CA (name differs): %v", err)
	}
	if _, ok := r.storedPin(t, srv.Addr()); ok {
		t.Fatal("ca mode pinned a certificate")
	}
	d := r.m.Document()
	if d.Mode != ModeCA || d.Anchor == nil || *d.Anchor != KindCA || len(d.CAs) != 1 || d.CAs[0].Source != "config" || d.State != StateTrusted {
		t.Fatalf("document %+v", d)
	}

	srv.set(ca2.Issue(t, testcert.Loopback))
	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonUntrusted {
		t.Fatalf("other CA: reason %q", got)
	}
	rec := putCA(r.m, `{"pem":`+jsonString(pemOf(ca2.Cert))+`}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT /sk/tls/ca = %d %s", rec.Code, rec.Body)
	}
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("after PUT /sk/tls/ca: %v", err)
	}
	if v, ok, _ := r.st.Get(OperatorKey); !ok || !strings.Contains(v, "BEGIN CERTIFICATE") {
		t.Fatal("PUT CA not in device state")
	}
	// The CA survives a restart.
	r.m = r.build(t)
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("operator CA after restart: %v", err)
	}
	// sk.ca_pem that is not PEM counts as no CA and says so.
	r.cfg.Set("sk", "ca_pem", []byte("garbage"))
	srv.set(ca1.Issue(t, testcert.Loopback))
	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonUntrusted {
		t.Fatalf("unusable sk.ca_pem: reason %q", got)
	}
}

// TestPutCAValidation: every malformed body is 400 validation and changes nothing.
func TestPutCAValidation(t *testing.T) {
	r := newRig(t)
	ca := testcert.NewCA(t, "CA")
	good := pemOf(ca.Cert)
	key := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n"
	cases := []struct {
		name, body, path string
	}{
		{"not JSON", `pem`, ""},
		{"array", `[]`, ""},
		{"null", `null`, ""},
		{"missing pem", `{}`, "pem"},
		{"pem a number", `{"pem":1}`, "pem"},
		{"unknown member", `{"pem":` + jsonString(good) + `,"x":1}`, "x"},
		{"empty", `{"pem":""}`, "pem"},
		{"not PEM", `{"pem":"hello"}`, "pem"},
		{"private key", `{"pem":` + jsonString(key) + `}`, "pem"},
		{"cert then key", `{"pem":` + jsonString(good+key) + `}`, "pem"},
		{"text after", `{"pem":` + jsonString(good+"trailing") + `}`, "pem"},
		{"corrupt DER", `{"pem":` + jsonString(strings.Replace(good, "MII", "MIX", 1)) + `}`, "pem"},
		{"truncated", `{"pem":` + jsonString(good[:len(good)/2]) + `}`, "pem"},
		{"too large", `{"pem":` + jsonString(strings.Repeat(good, 1+MaxCAPEM/len(good))) + `}`, "pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := r.eventCount()
			rec := putCA(r.m, tc.body)
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"error":"validation"`) ||
				!strings.Contains(rec.Body.String(), `"path":`+jsonString(tc.path)) {
				t.Fatalf("got %d %s", rec.Code, rec.Body)
			}
			if _, ok, _ := r.st.Get(OperatorKey); ok || r.eventCount() != n {
				t.Fatal("a refused PUT changed something")
			}
		})
	}
	// Two certificates with whitespace around them are fine; the document lists both.
	rec := putCA(r.m, `{"pem":`+jsonString("\n"+good+"\n\n"+pemOf(testcert.NewCA(t, "CA2").Cert)+"  \n")+`}`)
	if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `"source":"operator"`) != 2 {
		t.Fatalf("two CAs: %d %s", rec.Code, rec.Body)
	}
}

func putCA(m *Manager, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPut, "/sk/tls/ca", strings.NewReader(body))
	m.handlePutCA(rec, req)
	return rec
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestBundleMode: public roots only, with the name check and validity dates; nothing pinned.
func TestBundleMode(t *testing.T) {
	ca := testcert.NewCA(t, "Public CA")
	withRoots := func(o *Options) { o.Roots = pool([]*x509.Certificate{ca.Cert}) }
	expired := testcert.Leaf{DNS: []string{"localhost"}, IPs: []string{"127.0.0.1"}, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}
	cases := []struct {
		name  string
		cert  tls.Certificate
		roots bool
		ok    bool
	}{
		{"public CA, name matches", ca.Issue(t, testcert.Loopback), true, true},
		{"public CA, name differs (CN matches is not enough)", ca.Issue(t, testcert.Leaf{CN: "127.0.0.1", DNS: []string{"other.example"}}), true, false},
		{"public CA, expired", ca.Issue(t, expired), true, false},
		{"self-signed", testcert.SelfSigned(t, testcert.Loopback), true, false},
		{"private CA against the system pool", ca.Issue(t, testcert.Loopback), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r *rig
			if tc.roots {
				r = newRig(t, withRoots)
			} else {
				r = newRig(t)
			}
			r.cfg.Set("sk", "tls_trust", ModeBundle)
			srv := newTLSServer(t, tc.cert, nil)
			err := r.get(t, srv.Addr())
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && certErrReason(t, err) != ReasonUntrusted {
				t.Fatalf("reason for %v", err)
			}
			if _, ok := r.storedPin(t, srv.Addr()); ok {
				t.Fatal("bundle mode pinned")
			}
			if d := r.m.Document(); d.Anchor == nil || *d.Anchor != ModeBundle {
				t.Fatalf("anchor %v", d.Anchor)
			}
		})
	}

	// The same expired leaf is accepted under tofu: outside bundle the anchor decides.
	r := newRig(t)
	srv := newTLSServer(t, ca.Issue(t, expired), nil)
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("tofu with an expired leaf: %v", err)
	}
}

// TestOperatorCAInTOFU: in tofu a CA set by PUT /sk/tls/ca vouches for a replacement that no
// longer matches the pin; once proven, the replacement becomes the pin.
func TestOperatorCAInTOFU(t *testing.T) {
	r := newRig(t)
	ca1, ca2 := testcert.NewCA(t, "Old CA"), testcert.NewCA(t, "New CA")
	srv := r.firstUse(t, ca1)
	srv.set(ca2.Issue(t, testcert.Loopback))
	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonMismatch {
		t.Fatalf("reason %q", got)
	}
	retries := r.retries.Load()
	if rec := putCA(r.m, `{"pem":`+jsonString(pemOf(ca2.Cert))+`}`); rec.Code != http.StatusOK {
		t.Fatalf("PUT = %d %s", rec.Code, rec.Body)
	}
	r.wantRetry(t, "PUT /sk/tls/ca", retries)
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("after PUT: %v", err)
	}
	r.wantPin(t, "the proven replacement", srv.Addr(), "", ca2.Cert)
}

// TestDeleteKeepsOperatorCA: DELETE /sk/tls forgets the captured pin and retries, but the CA
// of PUT /sk/tls/ca (and sk.ca_pem) stays and still anchors the server in ca mode.
func TestDeleteKeepsOperatorCA(t *testing.T) {
	r := newRig(t)
	opCA, cfgCA, other := testcert.NewCA(t, "Operator CA"), testcert.NewCA(t, "Config CA"), testcert.NewCA(t, "Other CA")
	r.cfg.Set("sk", "ca_pem", []byte(pemOf(cfgCA.Cert)))
	srv := r.firstUse(t, opCA)
	if _, ok := r.storedPin(t, srv.Addr()); !ok {
		t.Fatal("first use captured nothing")
	}
	if rec := putCA(r.m, `{"pem":`+jsonString(pemOf(opCA.Cert))+`}`); rec.Code != http.StatusOK {
		t.Fatalf("PUT /sk/tls/ca = %d %s", rec.Code, rec.Body)
	}

	retries := r.retries.Load()
	rec := httptest.NewRecorder()
	r.m.handleDelete(rec, httptest.NewRequest(http.MethodDelete, "/sk/tls", nil))
	if rec.Code != http.StatusOK || r.retries.Load() != retries+1 {
		t.Fatalf("DELETE: %d %s, retries %d", rec.Code, rec.Body, r.retries.Load()-retries)
	}
	if _, ok := r.storedPin(t, srv.Addr()); ok {
		t.Fatal("DELETE kept the pin")
	}
	var doc Document
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	wantCAs := func(d Document, when string) {
		t.Helper()
		var got []string
		for _, c := range d.CAs {
			got = append(got, c.Source+":"+c.SHA256)
		}
		want := []string{"config:" + fingerprint(cfgCA.Cert), "operator:" + fingerprint(opCA.Cert)}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: CAs %v, want %v", when, got, want)
		}
	}
	if doc.Pinned != nil || doc.State != StateNone {
		t.Fatalf("DELETE answered %+v", doc)
	}
	wantCAs(doc, "DELETE answer")
	if v, ok, _ := r.st.Get(OperatorKey); !ok || !strings.Contains(v, "BEGIN CERTIFICATE") {
		t.Fatal("DELETE removed the operator CA from device state")
	}
	r.m = r.build(t)
	wantCAs(r.m.Document(), "after a restart")

	// ca mode: the kept CA anchors the server, whatever its names, and pins nothing; a chain
	// from another CA is still refused, and a further DELETE changes none of that.
	r.cfg.Set("sk", "tls_trust", ModeCA)
	srv.set(opCA.Issue(t, testcert.Leaf{DNS: []string{"boat.example"}}))
	for _, step := range []string{"before", "after"} {
		if err := r.get(t, srv.Addr()); err != nil {
			t.Fatalf("ca mode %s a second DELETE: %v", step, err)
		}
		if _, ok := r.storedPin(t, srv.Addr()); ok {
			t.Fatal("ca mode pinned a certificate")
		}
		if d := r.m.Document(); d.State != StateTrusted || d.Anchor == nil || *d.Anchor != KindCA {
			t.Fatalf("ca mode document %+v", d)
		}
		if err := r.m.Forget(); err != nil {
			t.Fatal(err)
		}
	}
	srv.set(other.Issue(t, testcert.Loopback))
	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonUntrusted {
		t.Fatalf("another CA in ca mode: reason %q", got)
	}
}

// TestUnreadablePinRefuses: a stored pin that cannot be decoded is never replaced silently.
func TestUnreadablePinRefuses(t *testing.T) {
	r := newRig(t)
	srv := newTLSServer(t, testcert.SelfSigned(t, testcert.Loopback), nil)
	if err := r.st.Set(PinPrefix+srv.Addr(), `{"v":1,"kind":"leaf","cert":"AAAA"}`); err != nil {
		t.Fatal(err)
	}
	r.m = r.build(t)
	if got := certErrReason(t, r.get(t, srv.Addr())); got != ReasonUnreadablePin {
		t.Fatalf("reason %q", got)
	}
	if err := r.m.Forget(); err != nil {
		t.Fatal(err)
	}
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("after Forget: %v", err)
	}
	if _, ok := r.storedPin(t, srv.Addr()); !ok {
		t.Fatal("not re-pinned")
	}
}

// TestPinsPerServerAndEviction: each server keeps its own pin, up to MaxPins.
func TestPinsPerServerAndEviction(t *testing.T) {
	r := newRig(t)
	var srvs []*tlsServer
	for i := 0; i <= MaxPins; i++ {
		s := newTLSServer(t, testcert.SelfSigned(t, testcert.Loopback), nil)
		srvs = append(srvs, s)
		if err := r.get(t, s.Addr()); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(time.Second)
	}
	if _, ok := r.storedPin(t, srvs[0].Addr()); ok {
		t.Fatal("the oldest pin was kept beyond MaxPins")
	}
	for _, s := range srvs[1:] {
		if _, ok := r.storedPin(t, s.Addr()); !ok {
			t.Fatalf("pin of %s lost", s.Addr())
		}
		if err := r.get(t, s.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	// DELETE forgets only the current server's pin.
	r.m.SetServer(srvs[1].Addr())
	if err := r.m.Forget(); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.storedPin(t, srvs[1].Addr()); ok {
		t.Fatal("current pin kept")
	}
	if _, ok := r.storedPin(t, srvs[2].Addr()); !ok {
		t.Fatal("another server's pin forgotten")
	}
}

// TestCertErrorWrapping: the classification survives the wrappers callers see.
func TestCertErrorWrapping(t *testing.T) {
	ce := &CertError{Addr: "h:1", Mode: ModeTOFU, Reason: ReasonMismatch, Err: errors.New("x")}
	for _, err := range []error{ce, &net.OpError{Op: "remote error", Err: ce}, errors.Join(errors.New("a"), ce)} {
		if !IsCertError(err) {
			t.Fatalf("%v not classified", err)
		}
	}
	for _, err := range []error{nil, errors.New("connection refused"), context.DeadlineExceeded, tls.RecordHeaderError{}} {
		if IsCertError(err) {
			t.Fatalf("%v classified as a cert error", err)
		}
	}
}
