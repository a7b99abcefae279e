package sktls

import (
	"bufio"
	"context"
	"crypto/tls"
	"devhost/host/signalk/sktest/testcert"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func splitAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// rawServer answers each connection by its current mode: hang up at once, or answer one plain
// HTTP 200. It counts connections and remembers the last request.
type rawServer struct {
	ln      net.Listener
	answer  atomic.Bool
	accepts atomic.Int64
	last    atomic.Pointer[http.Request]
}

func newRawServer(t *testing.T) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	acceptAll(t, ln, func(c net.Conn) {
		s.accepts.Add(1)
		if !s.answer.Load() {
			_ = c.Close()
			return
		}
		go func() {
			defer c.Close()
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			s.last.Store(req)
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"))
		}()
	})
	return s
}

// tlsOnlyServer speaks only TLS and hangs up on anything else (as Node's https server does;
// Go's http.Server would answer a plain request with a 400).
func tlsOnlyServer(t *testing.T) (addr string, hits *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{testcert.SelfSigned(t, testcert.Loopback)}}
	hits = &atomic.Int64{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("{}"))
	})}
	go func() { _ = srv.Serve(hidingListener{ln, cfg}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), hits
}

type hidingListener struct {
	net.Listener
	cfg *tls.Config
}

// opaqueConn hides the *tls.Conn from http.Server, which would otherwise answer plain HTTP.
type opaqueConn struct{ net.Conn }

func (l hidingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return opaqueConn{tls.Server(c, l.cfg)}, nil
}

func redirectServer(t *testing.T, code int, location string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	hits := &atomic.Int64{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/signalk" || r.Method != http.MethodGet || r.Header.Get("Authorization") != "" {
			t.Errorf("probe request %s %s auth %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		}
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s, hits
}

// TestProbeAnswers: the probe's verdict for each kind of answer, and that answers are
// remembered while guesses are not.
func TestProbeAnswers(t *testing.T) {
	tlsSrv := newTLSServer(t, testcert.SelfSigned(t, testcert.Loopback), nil)
	_, tlsPort := splitAddr(t, tlsSrv.Addr())
	cases := []struct {
		name       string
		code       int
		location   func(port int) string
		wantScheme string
		samePort   bool
	}{
		{"200 JSON", 200, nil, "http", true},
		{"404", 404, nil, "http", true},
		{"302 to https with port", 302, func(int) string { return "https://127.0.0.1:" + strconv.Itoa(tlsPort) + "/signalk" }, "https", false},
		{"301 to https without port", 301, func(int) string { return "https://sk.local/signalk" }, "https", true},
		{"307 to https, other host", 307, func(int) string { return "https://10.9.9.9:" + strconv.Itoa(tlsPort) + "/" }, "https", false},
		{"302 to http", 302, func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) + "/signalk/" }, "http", true},
		{"302 relative", 302, func(int) string { return "/signalk/" }, "http", true},
		{"302 without Location", 302, nil, "http", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			var srv *httptest.Server
			var hits *atomic.Int64
			if tc.location == nil {
				srv, hits = redirectServer(t, tc.code, "")
			} else {
				// The Location may name the server's own port: build it after listening.
				loc := ""
				srv, hits = redirectServer(t, tc.code, "")
				_, p := splitAddr(t, srv.Listener.Addr().String())
				loc = tc.location(p)
				srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits.Add(1)
					w.Header().Set("Location", loc)
					w.WriteHeader(tc.code)
				})
			}
			host, port := splitAddr(t, srv.Listener.Addr().String())
			ep, err := r.m.Resolve(context.Background(), host, port, "")
			if err != nil {
				t.Fatal(err)
			}
			wantPort := port
			if !tc.samePort {
				wantPort = tlsPort
			}
			if ep.Scheme != tc.wantScheme || ep.Port != wantPort || ep.Host != host || ep.Guess || ep.Source != SourceProbe {
				t.Fatalf("endpoint %+v, want %s port %d", ep, tc.wantScheme, wantPort)
			}
			// Remembered: a second Resolve asks nobody.
			if ep2, _ := r.m.Resolve(context.Background(), host, port, ""); ep2 != ep || hits.Load() != 1 {
				t.Fatalf("second resolve %+v, server asked %d times", ep2, hits.Load())
			}
			if tlsSrv.hits.Load() != 0 {
				t.Fatal("the probe followed the redirect")
			}
		})
	}
}

// TestProbeHTTPSRetry: a port that hangs up on plain HTTP but completes a TLS handshake is
// https, on the same port, without trusting or pinning anything.
func TestProbeHTTPSRetry(t *testing.T) {
	r := newRig(t)
	addr, _ := tlsOnlyServer(t)
	host, port := splitAddr(t, addr)
	ep, err := r.m.Resolve(context.Background(), host, port, "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Scheme != "https" || ep.Port != port || ep.Guess {
		t.Fatalf("endpoint %+v", ep)
	}
	if d := r.m.Document(); d.Presented != nil || d.Pinned != nil {
		t.Fatal("the probe's handshake was recorded as the server's certificate")
	}
	if _, ok := r.storedPin(t, addr); ok {
		t.Fatal("the probe pinned")
	}
}

// TestProbeGuess: with no answer over http or https, plain http is a guess, not remembered:
// every Resolve asks again, and a later answer is remembered.
func TestProbeGuess(t *testing.T) {
	r := newRig(t)
	srv := newRawServer(t)
	host, port := splitAddr(t, srv.ln.Addr().String())
	for i := range 3 {
		before := srv.accepts.Load()
		ep, err := r.m.Resolve(context.Background(), host, port, "")
		if err != nil {
			t.Fatal(err)
		}
		if ep.Scheme != "http" || !ep.Guess || ep.Source != SourceGuess || ep.Port != port {
			t.Fatalf("attempt %d: %+v", i, ep)
		}
		if srv.accepts.Load()-before < 2 {
			t.Fatalf("attempt %d: probe did not try http and then https (%d connections)", i, srv.accepts.Load()-before)
		}
	}
	srv.answer.Store(true)
	ep, err := r.m.Resolve(context.Background(), host, port, "")
	if err != nil || ep.Guess || ep.Scheme != "http" {
		t.Fatalf("answered: %+v %v", ep, err)
	}
	if req := srv.last.Load(); req == nil || req.URL.Path != "/signalk" || req.Header.Get("Authorization") != "" {
		t.Fatalf("probe request %+v", req)
	}
	n := srv.accepts.Load()
	if _, err := r.m.Resolve(context.Background(), host, port, ""); err != nil || srv.accepts.Load() != n {
		t.Fatal("an answer was not remembered")
	}
	// A change of the server setting forgets it.
	r.cfg.Set("sk", "server_port", "1")
	if _, err := r.m.Resolve(context.Background(), host, port, ""); err != nil || srv.accepts.Load() != n+1 {
		t.Fatal("the remembered answer survived a server change")
	}
}

// TestProbeUnreachableClosedPort: a port nobody listens on is a guess as well.
func TestProbeUnreachableClosedPort(t *testing.T) {
	r := newRig(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	host, port := splitAddr(t, addr)
	ep, err := r.m.Resolve(context.Background(), host, port, "")
	if err != nil || !ep.Guess || ep.Scheme != "http" {
		t.Fatalf("%+v %v", ep, err)
	}
}

// TestResolveWithoutProbe: sk.scheme http/https and a discovered server's advertised type
// decide without asking the server.
func TestResolveWithoutProbe(t *testing.T) {
	srv := newRawServer(t)
	host, port := splitAddr(t, srv.ln.Addr().String())
	cases := []struct {
		scheme, advertised, want, source string
	}{
		{"http", "", "http", SourceForced},
		{"https", "", "https", SourceForced},
		{"http", "https", "http", SourceForced},
		{"auto", "https", "https", SourceAdvertised},
		{"auto", "http", "http", SourceAdvertised},
	}
	for _, tc := range cases {
		r := newRig(t)
		r.cfg.Set("sk", "scheme", tc.scheme)
		ep, err := r.m.Resolve(context.Background(), host, port, tc.advertised)
		if err != nil || ep.Scheme != tc.want || ep.Source != tc.source || ep.Guess {
			t.Fatalf("%+v: %+v %v", tc, ep, err)
		}
	}
	if srv.accepts.Load() != 0 {
		t.Fatal("a forced or advertised scheme probed the server")
	}
	r := newRig(t)
	if _, err := r.m.Resolve(context.Background(), "", 80, ""); err == nil {
		t.Fatal("empty host accepted")
	}
	if _, err := r.m.Resolve(context.Background(), "h", 0, ""); err == nil {
		t.Fatal("port 0 accepted")
	}
}

// TestProbeTimeout: a server that accepts and never answers is cut off at ProbeTimeout on the
// fake clock (both legs), giving a guess; a cancelled context is an error, not a guess.
func TestProbeTimeout(t *testing.T) {
	r := newRig(t)
	addr := stallListener(t)
	host, port := splitAddr(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan Endpoint, 1)
	go func() {
		ep, _ := r.m.Resolve(ctx, host, port, "")
		done <- ep
	}()
	for range 2 { // the http leg, then the https leg
		if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(ProbeTimeout)
	}
	if ep := <-done; !ep.Guess {
		t.Fatalf("%+v", ep)
	}

	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := r.m.Resolve(cctx, host, port, ""); err == nil {
		t.Fatal("cancelled resolve gave an answer")
	}
}
