package signalk

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/health"
)

var errFakeCert = errors.New("fake: certificate does not match the pin")

// fakeTLS stands in for host/sktls: it trusts the test server unless told to refuse.
type fakeTLS struct {
	refuse atomic.Bool
	dials  atomic.Int32
	proven atomic.Int32
	mu     sync.Mutex
	server string
}

func (f *fakeTLS) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	f.dials.Add(1)
	if f.refuse.Load() {
		return nil, errFakeCert
	}
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own server
	return d.DialContext(ctx, network, addr)
}
func (f *fakeTLS) Proven(_ string, cs *tls.ConnectionState) error {
	if cs != nil {
		f.proven.Add(1)
	}
	return nil
}
func (f *fakeTLS) IsCertError(err error) bool { return errors.Is(err, errFakeCert) }
func (f *fakeTLS) Resolve(_ context.Context, _ string, port int, _ string) (string, int, bool, error) {
	return "https", port, false, nil
}
func (f *fakeTLS) SetServer(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.server = addr
}

// tlsRig starts a client on an https peer with a stored token.
func tlsRig(t *testing.T, ft *fakeTLS) (*peer, *rig) {
	return tokenRig(t, true, func(o *Options) { o.TLS = ft })
}

// Over TLS one 401 is conclusive: no 5 s re-check.
func TestTokenTLS401Conclusive(t *testing.T) {
	ft := &fakeTLS{}
	p, r := tlsRig(t, ft)
	p.pendingRequest(http.StatusOK, pendingJS)
	r.start()
	r.waitState(StateApproved, true)
	if r.c.Status().Server.Scheme != "https" || ft.proven.Load() == 0 {
		t.Fatalf("scheme %q, proven %d", r.c.Status().Server.Scheme, ft.proven.Load())
	}
	if tg := r.stream.target(); !tg.TLS || tg.DialTLS == nil {
		t.Fatalf("stream target without TLS: %+v", tg)
	}
	p.on("GET", "/signalk/v1/api/vessels/self/x", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	})
	_, _, _ = r.c.HTTP(t.Context(), "GET", "/signalk/v1/api/vessels/self/x", nil)
	st := r.waitState(StateRequested, true)
	if st.HasToken || len(p.calls("GET", pathSelf)) != 1 {
		t.Fatalf("TLS 401: token kept %v, verifies %d", st.HasToken, len(p.calls("GET", pathSelf)))
	}
}

// Row: VERIFYING refused by the certificate check → cert_error: token kept, stream down, flat
// 60 s retry, skCertificate alarm; a new anchor (RetryNow) retries at once and the flow resumes.
func TestTokenCertError(t *testing.T) {
	ft := &fakeTLS{}
	ft.refuse.Store(true)
	_, r := tlsRig(t, ft)
	r.start()
	st := r.waitState(StateCertError, true)
	if !st.HasToken || st.Resume != StateVerifying {
		t.Fatalf("cert_error: %+v", st)
	}
	if tg := r.stream.target(); tg.Host != "" {
		t.Fatalf("stream target during cert_error: %+v", tg)
	}
	if conds := r.hlth.Conditions(); !hasCond(conds, KeyCertificate, health.Alarm) {
		t.Fatalf("skCertificate not raised: %+v", conds)
	}
	for i := 0; i < 3; i++ {
		if d := r.nextRetry(); d != FlatRetry {
			t.Fatalf("retry %d in %s, want a flat 60 s", i, d)
		}
		n := ft.dials.Load()
		r.clk.Advance(FlatRetry)
		eventually(t, "retry dial", func() bool { return ft.dials.Load() > n && r.nextRetry() > 0 })
		r.waitState(StateCertError, true)
	}
	ft.refuse.Store(false)
	r.c.RetryNow()
	r.waitState(StateApproved, true)
	if conds := r.hlth.Conditions(); !hasCond(conds, KeyCertificate, health.Normal) {
		t.Fatalf("skCertificate not cleared: %+v", conds)
	}
	if tg := r.stream.target(); tg.Token != "tok1" {
		t.Fatalf("stream target after recovery: %+v", tg)
	}
	// A cert refusal seen by the stream while APPROVED moves to cert_error too.
	r.c.StreamCertError(errFakeCert)
	r.waitState(StateCertError, true)
	_ = time.Second
}

func hasCond(conds []health.Condition, key string, st health.State) bool {
	for _, c := range conds {
		if c.Key == key && c.State == st {
			return true
		}
	}
	return false
}
