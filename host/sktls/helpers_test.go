package sktls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/store"

	"github.com/jonboulle/clockwork"
)

// issuer is a test CA.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustCert(t testing.TB, tmpl, parent *x509.Certificate, pub any, signer *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newCA(t testing.TB, cn string) *issuer {
	t.Helper()
	k := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"devhost test"}},
		NotBefore:             time.Now().Add(-2 * time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	return &issuer{cert: mustCert(t, tmpl, tmpl, &k.PublicKey, k), key: k}
}

// leafOpts shape a leaf.
type leafOpts struct {
	cn        string
	dns       []string
	ips       []string
	notBefore time.Time
	notAfter  time.Time
	noChain   bool // send only the leaf, not the CA
}

// leaf issues a server certificate; the chain sent carries the CA unless noChain.
func (ca *issuer) leaf(t testing.TB, o leafOpts) tls.Certificate {
	t.Helper()
	k := newKey(t)
	tmpl := leafTemplate(o)
	c := mustCert(t, tmpl, ca.cert, &k.PublicKey, ca.key)
	chain := [][]byte{c.Raw}
	if !o.noChain {
		chain = append(chain, ca.cert.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: k, Leaf: c}
}

func leafTemplate(o leafOpts) *x509.Certificate {
	if o.cn == "" {
		o.cn = "signalk"
	}
	if o.notBefore.IsZero() {
		o.notBefore = time.Now().Add(-time.Hour)
	}
	if o.notAfter.IsZero() {
		o.notAfter = time.Now().Add(365 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: o.cn},
		NotBefore:    o.notBefore,
		NotAfter:     o.notAfter,
		DNSNames:     o.dns,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, s := range o.ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(s))
	}
	return tmpl
}

// selfSigned is a self-signed server certificate (not a CA), with the names of o.
func selfSigned(t testing.TB, o leafOpts) tls.Certificate {
	t.Helper()
	k := newKey(t)
	tmpl := leafTemplate(o)
	c := mustCert(t, tmpl, tmpl, &k.PublicKey, k)
	return tls.Certificate{Certificate: [][]byte{c.Raw}, PrivateKey: k, Leaf: c}
}

func pemOf(certs ...*x509.Certificate) string {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return string(out)
}

var loopbackNames = leafOpts{dns: []string{"localhost", "sk.local"}, ips: []string{"127.0.0.1"}}

// tlsServer is an httptest server on loopback whose certificate can be swapped between
// handshakes, so a renewal or a changed leaf arrives on the same address.
type tlsServer struct {
	*httptest.Server
	cert   atomic.Pointer[tls.Certificate]
	hits   atomic.Int64
	hellos atomic.Int64 // handshakes that reached the server
}

func (s *tlsServer) Addr() string { return s.Listener.Addr().String() }

func (s *tlsServer) set(c tls.Certificate) { s.cert.Store(&c) }

func newTLSServer(t testing.TB, c tls.Certificate, h http.Handler) *tlsServer {
	t.Helper()
	s := &tlsServer{}
	s.set(c)
	if h == nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"endpoints":{}}`))
		})
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.hellos.Add(1)
		return s.cert.Load(), nil
	}}
	// A TLS listener of our own (not StartTLS, which would add its own certificate).
	s.Listener = tls.NewListener(s.Listener, cfg)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point of many tests
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// fakeConfig is the sk.* configuration.
type fakeConfig struct {
	mu        sync.Mutex
	strs      map[string]string
	blobs     map[string][]byte
	listeners []func(ns, key string)
}

func newFakeConfig() *fakeConfig {
	return &fakeConfig{strs: map[string]string{"scheme": "auto", "tls_trust": "tofu"}, blobs: map[string][]byte{}}
}

func (f *fakeConfig) String(ns, key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != "sk" {
		return ""
	}
	return f.strs[key]
}

func (f *fakeConfig) Blob(ns, key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ns != "sk" {
		return nil
	}
	return append([]byte(nil), f.blobs[key]...)
}

func (f *fakeConfig) OnChange(fn func(ns, key string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listeners = append(f.listeners, fn)
}

func (f *fakeConfig) set(key string, v any) {
	f.mu.Lock()
	switch v := v.(type) {
	case string:
		f.strs[key] = v
	case []byte:
		f.blobs[key] = v
	}
	ls := append([]func(string, string){}, f.listeners...)
	f.mu.Unlock()
	for _, fn := range ls {
		fn("sk", key)
	}
}

// rig is a manager with its store, configuration, fake clock and recorded side effects.
type rig struct {
	m       *Manager
	st      *store.Store
	cfg     *fakeConfig
	clock   *clockwork.FakeClock
	path    string
	retries atomic.Int64

	mu     sync.Mutex
	events []Document
}

type rigOption func(*Options)

func newRig(t testing.TB, opts ...rigOption) *rig {
	t.Helper()
	r := &rig{cfg: newFakeConfig(), clock: clockwork.NewFakeClockAt(time.Now()), path: filepath.Join(t.TempDir(), "nvs.db")}
	st, err := store.Open(r.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r.st = st
	r.m = r.build(t, opts...)
	return r
}

func (r *rig) build(t testing.TB, opts ...rigOption) *Manager {
	t.Helper()
	o := Options{
		Store: r.st, Config: r.cfg, Clock: r.clock,
		Publish: func(name string, data any) {
			if name != EventName {
				t.Errorf("event %q", name)
			}
			r.mu.Lock()
			r.events = append(r.events, data.(Document))
			r.mu.Unlock()
		},
		OnRetry: func() { r.retries.Add(1) },
	}
	for _, f := range opts {
		f(&o)
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (r *rig) eventCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *rig) lastEvent() Document {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.events[len(r.events)-1]
}

// get makes GET https://addr/signalk through the manager's dialer; the dialled connection
// proves itself on the response's status line.
func (r *rig) get(t testing.TB, addr string) error {
	t.Helper()
	tr := &http.Transport{DialTLSContext: r.m.DialTLSContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/signalk", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

func (r *rig) storedPin(t testing.TB, addr string) (*anchor, bool) {
	t.Helper()
	v, ok, err := r.st.Get(PinPrefix + normAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil, false
	}
	a, err := decodeAnchor(v)
	if err != nil {
		t.Fatalf("stored pin: %v", err)
	}
	return a, true
}

func certErrReason(t testing.TB, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("connection accepted, want a certificate refusal")
	}
	var ce *CertError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a CertError", err)
	}
	return ce.Reason
}
