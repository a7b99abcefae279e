package signalk

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/health"
)

// storedTokens answers every stored token.
func storedTokens(r *rig) []string {
	var out []string
	for _, rec := range r.c.st.records() {
		if rec.Token != "" {
			out = append(out, rec.Token)
		}
	}
	return out
}

// Faults of a server that cannot judge the token. None of them drops it.
var verifyFaults = []struct {
	name   string
	script func(p *peer) // nil: the server is gone (connection refused)
}{
	{"refused", nil},
	{"closed mid-response", func(p *peer) {
		p.on("GET", pathSelf, func(w http.ResponseWriter, _ *http.Request) {
			hj, ok := w.(http.Hijacker)
			if !ok {
				return
			}
			c, buf, err := hj.Hijack()
			if err != nil {
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n\"vessels.urn:mrn")
			_ = buf.Flush()
			_ = c.Close()
		})
	}},
	{"503", func(p *peer) { p.answer("GET", pathSelf, http.StatusServiceUnavailable, "Service Unavailable") }},
	{"500", func(p *peer) { p.answer("GET", pathSelf, http.StatusInternalServerError, `{"message":"boom"}`) }},
	{"html 200", func(p *peer) {
		p.on("GET", pathSelf, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>Sign in to the marina WiFi</body></html>")
		})
	}},
	{"html 502", func(p *peer) {
		p.on("GET", pathSelf, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		})
	}},
}

// applyFault puts a fault in place (closing the server for "refused").
func applyFault(p *peer, script func(*peer)) {
	if script == nil {
		p.Close()
		return
	}
	script(p)
}

// waitTarget waits for the stream target to satisfy ok: the client hands it over just after
// the token state is published.
func waitTarget(t *testing.T, r *rig, what string, ok func(Target) bool) {
	t.Helper()
	eventually(t, "stream target "+what, func() bool { return ok(r.stream.target()) })
}

// checkKept asserts the state, the token in memory, in the store and on the stream target.
func checkKept(t *testing.T, r *rig, state string) {
	t.Helper()
	st := r.c.tm.Status()
	if st.State != state || !st.HasToken {
		t.Fatalf("state %s (%s), token kept %v; want %s with the token", st.State, st.Reason, st.HasToken, state)
	}
	if toks := storedTokens(r); len(toks) != 1 || toks[0] != "tok1" {
		t.Fatalf("stored tokens %v", toks)
	}
	waitTarget(t, r, "with the token", func(tg Target) bool { return tg.Token == "tok1" && tg.Host != "" })
}

// Row VERIFYING: a check that gets no usable answer keeps the token and VERIFYING, and retries.
func TestTokenKeptWhileVerifying(t *testing.T) {
	for _, f := range verifyFaults {
		t.Run(f.name, func(t *testing.T) {
			p := newPeer(t, false)
			r := newRig(t, p, nil)
			r.keep(p, record{Token: "tok1"})
			applyFault(p, f.script)
			r.start()
			// The backoff grows with each retry, so each new delay marks a new answer.
			for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
				eventually(t, "check answered", func() bool {
					return r.c.tm.Status().State == StateVerifying && r.nextRetry() == want
				})
				checkKept(t, r, StateVerifying)
				if n := len(p.calls("POST", pathRequests)); n != 0 {
					t.Fatalf("asked for access again (%d) with a token kept", n)
				}
				r.clk.Advance(want)
			}
		})
	}
}

// Row APPROVED: a re-check that gets no usable answer keeps the token, APPROVED and the
// stream's target; the check is retried.
func TestTokenKeptWhileApproved(t *testing.T) {
	for _, f := range verifyFaults {
		t.Run(f.name, func(t *testing.T) {
			p, r := tokenRig(t, false, nil)
			r.cfg.Set("sk", "check_s", 600)
			r.start()
			r.waitState(StateApproved, true)
			waitTarget(t, r, "with the token", func(tg Target) bool { return tg.Token == "tok1" })
			checkKept(t, r, StateApproved)
			r.stream.mu.Lock()
			targets := len(r.stream.targets)
			r.stream.mu.Unlock()
			applyFault(p, f.script)
			r.clk.Advance(600 * time.Second)
			for _, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
				eventually(t, "re-check answered", func() bool {
					return r.c.tm.Status().Reason != "" && r.nextRetry() == want
				})
				checkKept(t, r, StateApproved)
				if rec, err := r.c.st.load(testSelf); err != nil || rec.Token != "tok1" {
					t.Fatalf("record under the self URN: %+v %v", rec, err)
				}
				r.clk.Advance(want)
			}
			r.stream.mu.Lock()
			n := len(r.stream.targets)
			r.stream.mu.Unlock()
			if n != targets {
				t.Fatalf("the stream was re-targeted %d times while the server could not answer", n-targets)
			}
			if len(p.calls("POST", pathRequests)) != 0 {
				t.Fatal("asked for access again with a token kept")
			}
		})
	}
}

// sniffConn counts connections whose first byte is not a TLS handshake record.
type sniffConn struct {
	net.Conn
	once  sync.Once
	plain *atomic.Int32
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(func() {
			if b[0] != 0x16 {
				c.plain.Add(1)
			}
		})
	}
	return n, err
}

type sniffListener struct {
	net.Listener
	plain atomic.Int32
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, plain: &l.plain}, nil
}

// newSniffPeer is a TLS peer that counts plaintext connections.
func newSniffPeer(t *testing.T) (*peer, *sniffListener) {
	t.Helper()
	p := &peer{routes: map[string]http.HandlerFunc{}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	sl := &sniffListener{Listener: srv.Listener}
	srv.Listener = sl
	srv.StartTLS()
	p.Server = srv
	t.Cleanup(p.Close)
	return p, sl
}

// cert_error resumes the interrupted flow once the flat 60 s retry finds the handshake matching
// (the server renewed into a certificate the anchors accept), from several states; the token is
// kept throughout, the stream has no target while refused, and nothing is ever sent in clear.
func TestCertErrorResumesAfterRenewal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, p *peer, r *rig)
		reach  func(t *testing.T, r *rig) // to the state before the refusal
		refuse func(r *rig)               // makes the next call in that state
		prev   string
		after  func(t *testing.T, p *peer, r *rig) // the flow after the renewal
	}{
		{name: "REQUESTED", prev: StateRequested,
			setup: func(_ *testing.T, p *peer, _ *rig) {
				p.pendingRequest(http.StatusOK, pendingJS)
			},
			reach:  func(_ *testing.T, r *rig) { r.waitState(StateRequested, true) },
			refuse: func(r *rig) { r.clk.Advance(PollFirst) },
			after: func(t *testing.T, p *peer, r *rig) {
				st := r.waitState(StateRequested, true)
				if st.Pending != testHref || len(p.calls("POST", pathRequests)) != 1 {
					t.Fatalf("the pending request was not resumed: %+v, %d requests", st, len(p.calls("POST", pathRequests)))
				}
				// The resumed flow goes on to the token.
				p.answer("GET", testHref, http.StatusOK, approved)
				r.clk.Advance(r.nextRetry())
				r.waitState(StateApproved, true)
				waitTarget(t, r, "TLS with the token", func(tg Target) bool { return tg.Token == "tok1" && tg.TLS })
			}},
		{name: "APPROVED", prev: StateApproved,
			setup: func(t *testing.T, p *peer, r *rig) {
				r.cfg.Set("sk", "check_s", 600)
				r.keep(p, record{Token: "tok1"})
			},
			reach:  func(_ *testing.T, r *rig) { r.waitState(StateApproved, true) },
			refuse: func(r *rig) { r.clk.Advance(600 * time.Second) },
			after: func(t *testing.T, p *peer, r *rig) {
				r.waitState(StateApproved, true)
				waitTarget(t, r, "TLS with the token", func(tg Target) bool { return tg.Token == "tok1" && tg.TLS })
				if len(p.calls("POST", pathRequests)) != 0 {
					t.Fatal("asked for access again")
				}
			}},
		{name: "OPEN", prev: StateOpen,
			setup:  func(_ *testing.T, p *peer, _ *rig) { p.answer("POST", pathRequests, http.StatusNotFound, "Not Found") },
			reach:  func(_ *testing.T, r *rig) { r.waitState(StateOpen, true) },
			refuse: func(r *rig) { r.clk.Advance(FlatRetry) },
			after: func(t *testing.T, _ *peer, r *rig) {
				r.waitState(StateOpen, true)
				waitTarget(t, r, "TLS without a token", func(tg Target) bool { return tg.Host != "" && tg.Token == "" && tg.TLS })
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTLS{}
			p, sniff := newSniffPeer(t)
			selfOK(p, "tok1")
			r := newRig(t, p, func(o *Options) { o.TLS = ft })
			tc.setup(t, p, r)
			r.start()
			tc.reach(t, r)
			hadToken := r.c.tm.Status().HasToken

			ft.refuse.Store(true)
			tc.refuse(r)
			st := r.waitState(StateCertError, true)
			if st.Resume != tc.prev || st.HasToken != hadToken {
				t.Fatalf("cert_error %+v, want resume %s, token kept %v", st, tc.prev, hadToken)
			}
			waitTarget(t, r, "cleared during cert_error", func(tg Target) bool { return tg.Host == "" })
			// Still refused: each flat retry tries TLS again and stays.
			for i := 0; i < 2; i++ {
				if d := r.nextRetry(); d != FlatRetry {
					t.Fatalf("retry in %s, want 60 s", d)
				}
				n := ft.dials.Load()
				r.clk.Advance(FlatRetry)
				eventually(t, "retry dial", func() bool { return ft.dials.Load() > n && r.nextRetry() > 0 })
				if st := r.waitState(StateCertError, true); st.Resume != tc.prev {
					t.Fatalf("resume became %s", st.Resume)
				}
			}
			if hadToken {
				if toks := storedTokens(r); len(toks) != 1 || toks[0] != "tok1" {
					t.Fatalf("stored tokens during cert_error: %v", toks)
				}
			}
			// The server renewed: the handshake matches at the next flat retry.
			ft.refuse.Store(false)
			r.clk.Advance(FlatRetry)
			tc.after(t, p, r)
			if !hasCond(r.hlth.Conditions(), KeyCertificate, health.Normal) {
				t.Fatalf("skCertificate not cleared: %+v", r.hlth.Conditions())
			}
			if s := r.c.Server(); s == nil || s.Scheme != "https" {
				t.Fatalf("server %+v", s)
			}
			r.stream.mu.Lock()
			for _, tg := range r.stream.targets {
				if tg.Host != "" && !tg.TLS {
					t.Errorf("plaintext stream target %+v", tg)
				}
			}
			r.stream.mu.Unlock()
			if n := sniff.plain.Load(); n != 0 {
				t.Fatalf("%d plaintext connections to the TLS server", n)
			}
			for _, s := range p.calls("GET", pathSelf) {
				if s.Auth != "" && !strings.HasPrefix(s.Auth, "Bearer ") {
					t.Fatalf("authorization %q", s.Auth)
				}
			}
		})
	}
}
