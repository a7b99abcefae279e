package sktls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
	"devhost/host/signalk/sktest/testcert"
	"devhost/host/store"

	"github.com/jonboulle/clockwork"
)

func pemOf(certs ...*x509.Certificate) string {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return string(out)
}

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

// newFakeConfig is the configuration of the tests with the sk.* defaults the component reads.
// acceptAll hands every connection ln accepts to handle, on the accepting goroutine, which
// ends when ln closes at the end of the test.
func acceptAll(t testing.TB, ln net.Listener, handle func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
}

func newFakeConfig() *sktest.Config {
	return sktest.NewConfig(map[string]any{"sk.scheme": "auto", "sk.tls_trust": "tofu"})
}

// rig is a manager with its store, configuration, fake clock and recorded side effects.
type rig struct {
	m       *Manager
	st      *store.Store
	cfg     *sktest.Config
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

// firstUse serves a loopback leaf issued by ca and makes the first connection to it, the one
// that captures the pin in tofu; the server stays up for what the test does next.
func (r *rig) firstUse(t testing.TB, ca *testcert.CA) *tlsServer {
	t.Helper()
	srv := newTLSServer(t, ca.Issue(t, testcert.Loopback), nil)
	if err := r.get(t, srv.Addr()); err != nil {
		t.Fatalf("first use: %v", err)
	}
	return srv
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

// wantRetry fails the test unless what asked the client for one retry at once since the
// count was before.
func (r *rig) wantRetry(t testing.TB, what string, before int64) {
	t.Helper()
	if got := r.retries.Load(); got != before+1 {
		t.Fatalf("%s: %d retries asked, want 1", what, got-before)
	}
}

// wantPin fails the test unless the pin stored for addr is cert (and of kind, unless kind is
// ""), and answers it; what names the step.
func (r *rig) wantPin(t testing.TB, what, addr, kind string, cert *x509.Certificate) *anchor {
	t.Helper()
	pin, ok := r.storedPin(t, addr)
	if !ok || (kind != "" && pin.Kind != kind) || !bytes.Equal(pin.Cert.Raw, cert.Raw) {
		t.Fatalf("%s: pin %+v, want %s %s", what, pin, kind, cert.Subject)
	}
	return pin
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
