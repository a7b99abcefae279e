package signalk

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"devhost/host/health"
	"devhost/host/skstream"
	"devhost/host/skstream/skpeer"
)

// wsPeer scripts the delta stream on p: the first upgrade waits for release and answers 401,
// every later one is accepted with a hello. It answers how many upgrades were asked.
func wsPeer(t *testing.T, p *peer, token string, release <-chan struct{}) *atomic.Int32 {
	t.Helper()
	var upgrades atomic.Int32
	ws := skpeer.New(t)
	ws.SetHello(func(c *websocket.Conn) { _ = c.WriteMessage(websocket.TextMessage, []byte(liveHello)) })
	p.on("GET", skpeer.StreamPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Query().Has("token") {
			http.Error(w, "token not sent as a Bearer header", http.StatusBadRequest)
			return
		}
		if upgrades.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		ws.ServeHTTP(w, r)
	})
	return &upgrades
}

// A plaintext 401 on the upgrade: the token machine re-checks in 5 s, the check answers 200 and
// the machine is APPROVED again with the same token. The real stream must dial again and
// connect; it must not dial while the re-check is pending.
func TestStream401RecheckOKResumesRealStream(t *testing.T) {
	p := newPeer(t, false)
	selfOK(p, "tok1")
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	upgrades := wsPeer(t, p, "tok1", release)

	r := newRig(t, p, nil)
	var c *Client
	st := skstream.New(skstream.Options{Clock: r.clk, Hostname: "dev-ab12", Settings: skstream.DefaultSettings(),
		HTTP: func(ctx context.Context, m, path string, b []byte) (int, []byte, error) {
			return c.HTTP(ctx, m, path, b)
		},
		OnStatus:       func(skstream.Status) { c.StreamStatus() },
		OnUnauthorized: func(skstream.Unauthorized) { c.StreamUnauthorized() },
	})
	r.opts.Stream = StreamFrom(st)
	r.keep(p, record{Token: "tok1"})
	r.start()
	c = r.c
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The stored token is verified; the stream's first upgrade is held until then.
	r.waitState(StateApproved, true)
	eventually(t, "first upgrade", func() bool { return upgrades.Load() == 1 })
	close(release)
	eventually(t, "stream unauthorized", func() bool { return st.Status().State == skstream.StateUnauthorized })
	eventually(t, "5 s re-check scheduled", func() bool {
		s := r.c.tm.Status()
		return s.State == StateVerifying && r.nextRetry() == RecheckPlain
	})
	// While the re-check is pending the stream waits (no second upgrade on the same token).
	time.Sleep(50 * time.Millisecond)
	if n := upgrades.Load(); n != 1 || st.Connected() {
		t.Fatalf("stream dialed before the re-check: %d upgrades, connected %v", n, st.Connected())
	}

	r.clk.Advance(RecheckPlain)
	s := r.waitState(StateApproved, true)
	if !s.HasToken {
		t.Fatal("token dropped after one plaintext 401")
	}
	eventually(t, "stream connected again", st.Connected)
	if n := upgrades.Load(); n != 2 {
		t.Fatalf("%d upgrades, want 2", n)
	}
	if rec, err := r.c.st.load(testSelf); err != nil || rec.Token != "tok1" {
		t.Fatalf("stored record %+v %v", rec, err)
	}
	// The connection proved the token: a later single 401 is again the first of a run.
	eventually(t, "connect counted", func() bool {
		r.c.mu.Lock()
		defer r.c.mu.Unlock()
		return r.c.connects == 1 && r.c.everUp
	})
	for _, cond := range r.hlth.Conditions() {
		if cond.Key == KeyLinkStalled && cond.State != health.Normal {
			t.Fatalf("skLinkStalled %s while connected", cond.State)
		}
	}
}

// The resume is for a stream that was refused: re-entering APPROVED with the same target after
// a plain re-check (no refusal) leaves a live stream alone, and a refusal followed by an
// APPROVED with the same target retries it exactly once.
func TestStreamResumeOnlyAfterRefusal(t *testing.T) {
	p, r := tokenRig(t, false, nil)
	h, _ := p.hostPort()
	r.cfg.Set("sk", "check_s", 600)
	r.start()
	r.waitState(StateApproved, true)
	eventually(t, "stream target", func() bool { return r.stream.target().Token == "tok1" })
	targets := func() int {
		r.stream.mu.Lock()
		defer r.stream.mu.Unlock()
		return len(r.stream.targets)
	}
	retries := func() int {
		r.stream.mu.Lock()
		defer r.stream.mu.Unlock()
		return r.stream.retries
	}
	n := targets()
	// A regular re-check: no new target.
	r.clk.Advance(600 * time.Second)
	eventually(t, "re-check", func() bool { return len(p.calls("GET", pathSelf)) == 2 && r.nextRetry() > 0 })
	time.Sleep(20 * time.Millisecond)
	if targets() != n {
		t.Fatalf("a re-check re-targeted the stream: %d → %d", n, targets())
	}
	if retries() != 0 {
		t.Fatalf("a re-check retried the stream %d times", retries())
	}
	// The stream reports 401: VERIFYING (same target), then APPROVED retries it once.
	r.c.StreamUnauthorized()
	r.waitState(StateVerifying, true)
	if targets() != n || retries() != 0 {
		t.Fatal("the stream was re-targeted or retried before the re-check answered")
	}
	r.clk.Advance(RecheckPlain)
	r.waitState(StateApproved, true)
	eventually(t, "stream resumed", func() bool { return retries() == 1 })
	if tg := r.stream.target(); targets() != n || tg.Token != "tok1" || tg.Host != h {
		t.Fatalf("resume changed the target: %d → %d, %+v", n, targets(), tg)
	}
	r.clk.Advance(600 * time.Second)
	eventually(t, "re-check", func() bool { return len(p.calls("GET", pathSelf)) == 4 && r.nextRetry() > 0 })
	time.Sleep(20 * time.Millisecond)
	if retries() != 1 {
		t.Fatalf("resumed more than once: %d", retries())
	}
}

// A stream refused while the server answers access requests with 404 (OPEN) is retried by
// OPEN's 60 s re-POST, once per re-POST: never in a tight loop, never without a refusal.
func TestOpenRefusedStreamRetriedByRePost(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusNotFound, `{}`)
	r := newRig(t, p, nil)
	r.start()
	r.waitState(StateOpen, true)
	eventually(t, "stream target", func() bool { return r.stream.target().Host != "" })
	retries := func() int {
		r.stream.mu.Lock()
		defer r.stream.mu.Unlock()
		return r.stream.retries
	}
	posts := func() int { return len(p.calls("POST", pathRequests)) }
	// OPEN's own re-POST without a refusal leaves the stream alone.
	r.clk.Advance(FlatRetry)
	eventually(t, "re-POST", func() bool { return posts() == 2 })
	time.Sleep(20 * time.Millisecond)
	if retries() != 0 {
		t.Fatalf("retried %d times without a refusal", retries())
	}
	for i := 1; i <= 2; i++ {
		// The refusal asks for access at once; the 404 keeps OPEN but does not retry yet.
		r.c.StreamUnauthorized()
		eventually(t, "request after the refusal", func() bool { return posts() == 2*i+1 })
		time.Sleep(20 * time.Millisecond)
		if retries() != i-1 {
			t.Fatalf("refusal %d: retried at once (%d)", i, retries())
		}
		if st := r.c.tm.Status().State; st != StateOpen {
			t.Fatalf("state %s after a 404, want OPEN", st)
		}
		r.clk.Advance(FlatRetry)
		eventually(t, "re-POST", func() bool { return posts() == 2*i+2 })
		eventually(t, "stream retried by the re-POST", func() bool { return retries() == i })
	}
}
