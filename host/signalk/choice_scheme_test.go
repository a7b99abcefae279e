package signalk

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/skstream"
	"devhost/host/sktls"
)

// countingTLS counts scheme resolutions of the component it wraps.
type countingTLS struct {
	TLS
	resolves atomic.Int32
}

func (c *countingTLS) Resolve(ctx context.Context, host string, port int, adv string) (string, int, bool, error) {
	c.resolves.Add(1)
	return c.TLS.Resolve(ctx, host, port, adv)
}

// muteListener hangs up every connection while mute, so nothing answers at its address.
type muteListener struct {
	net.Listener
	mute    atomic.Bool
	accepts atomic.Int32
}

func (l *muteListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.accepts.Add(1)
		if !l.mute.Load() {
			return c, nil
		}
		_ = c.Close()
	}
}

// A manual server whose probe got no answer is a plain-http guess. Each attempt on the guess has
// the scheme probed again before the next one; once the server answers (a redirect to https)
// the client moves to TLS and never sends its request over the guess again.
func TestGuessedSchemeProbedAfterEachAttempt(t *testing.T) {
	tp := newPeer(t, true)
	tp.pendingRequest(http.StatusOK, pendingJS)
	th, tport := tp.hostPort()

	// The front answers everything with a redirect to the TLS port, once it answers at all.
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://"+net.JoinHostPort(th, strconv.Itoa(tport))+r.URL.Path, http.StatusFound)
	}))
	ml := &muteListener{Listener: front.Listener}
	ml.mute.Store(true)
	front.Listener = ml
	front.Start()
	t.Cleanup(front.Close)
	fh, fps, _ := net.SplitHostPort(ml.Addr().String())
	fport, _ := strconv.Atoi(fps)

	r := newRig(t, nil, nil)
	r.cfg.Set("sk", "server_host", fh)
	r.cfg.Set("sk", "server_port", fport)
	m, err := sktls.New(sktls.Options{Store: r.st, Config: r.cfg, Clock: r.clk})
	if err != nil {
		t.Fatal(err)
	}
	ct := &countingTLS{TLS: TLSFrom(m)}
	r.opts.TLS = ct
	r.start()

	// Probe (http, then https: no answer) → guess; the request fails; the probe runs again.
	st := r.waitState(StateError, true)
	if s := r.c.Server(); s == nil || !s.Guess || s.Scheme != "http" || s.Port != fport {
		t.Fatalf("server %+v, want a plain-http guess", s)
	}
	eventually(t, "probe after the failed attempt", func() bool { return ct.resolves.Load() == 2 })
	if r.nextRetry() != ErrorBackoffMin {
		t.Fatalf("next attempt in %s (%s)", r.nextRetry(), st.Reason)
	}
	time.Sleep(20 * time.Millisecond)
	if n := ct.resolves.Load(); n != 2 {
		t.Fatalf("%d probes without a new attempt", n)
	}

	// The server now answers; the next attempt on the guess gets a redirect, and the probe that
	// follows it finds TLS on the redirect's port.
	ml.mute.Store(false)
	r.clk.Advance(ErrorBackoffMin)
	r.waitState(StateRequested, true)
	s := r.c.Server()
	if s == nil || s.Scheme != "https" || s.Port != tport || s.Guess {
		t.Fatalf("server %+v, want https on %d", s, tport)
	}
	if n := len(tp.calls("POST", pathRequests)); n != 1 {
		t.Fatalf("%d requests over TLS", n)
	}
	// The scheme is known now: further attempts do not probe.
	n := ct.resolves.Load()
	r.clk.Advance(PollFirst)
	eventually(t, "poll", func() bool { return len(tp.calls("GET", testHref)) == 1 })
	time.Sleep(20 * time.Millisecond)
	if ct.resolves.Load() != n {
		t.Fatal("a known scheme was probed again after an attempt")
	}
}

// guessTLS is a TLS component whose probe never gets an answer.
type guessTLS struct {
	fakeTLS
	resolves atomic.Int32
}

func (g *guessTLS) Resolve(_ context.Context, _ string, port int, _ string) (string, int, bool, error) {
	g.resolves.Add(1)
	return "http", port, true, nil
}

// statusStream reports a settable skstream status.
type statusStream struct {
	*fakeStream
	state atomic.Value
}

func (s *statusStream) Status() any {
	st, _ := s.state.Load().(string)
	return skstream.Status{State: st}
}

// A failed stream attempt on a guessed scheme has the scheme probed again too (once per failed
// attempt, not once per status note).
func TestGuessedSchemeProbedAfterStreamAttempt(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusNotFound, "Not Found") // OPEN: the stream has a target
	gt := &guessTLS{}
	ss := &statusStream{fakeStream: newFakeStream()}
	ss.state.Store(skstream.StateConnecting)
	r := newRig(t, p, func(o *Options) { o.TLS = gt; o.Stream = ss })
	r.start()
	r.waitState(StateOpen, true)
	eventually(t, "probe after the request", func() bool { return gt.resolves.Load() == 2 })
	for i, step := range []struct {
		state string
		want  int32
	}{
		{skstream.StateBackoff, 3},
		{skstream.StateBackoff, 3}, // the same wait noted again
		{skstream.StateConnecting, 3},
		{skstream.StateBackoff, 4},
	} {
		ss.state.Store(step.state)
		r.c.StreamStatus()
		time.Sleep(20 * time.Millisecond)
		if n := gt.resolves.Load(); n != step.want {
			t.Fatalf("step %d (%s): %d probes, want %d", i, step.state, n, step.want)
		}
	}
}

// A discovered server without a self TXT is skipped by address when it does not answer.
func TestChooseSkipsSelflessUnreachable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := Server{Host: "10.0.0.1", Port: 3000, Scheme: "http"}
	b := Server{Host: "10.0.0.2", Port: 3000, Scheme: "http"}
	skipped := map[string]time.Time{}
	for _, k := range skipKeys(a) {
		skipped[k] = now.Add(time.Minute)
	}
	if got := choose(choiceInput{discovered: []Server{a, b}, now: now, skipped: skipped}); got == nil || got.Host != b.Host {
		t.Fatalf("chose %+v, want the server not skipped", got)
	}

	dead := newPeer(t, false)
	dh, dp := dead.hostPort()
	dead.Close()
	live := newPeer(t, false)
	live.pendingRequest(http.StatusOK, pendingJS)
	lh, lp := live.hostPort()
	disc := newFakeDiscovery(
		Server{Host: dh, Port: dp, Scheme: "http", TXT: map[string]string{"swname": "signalk-server"}},
		Server{Host: lh, Port: lp, Scheme: "http"})
	r := newRig(t, nil, func(o *Options) { o.Discovery = disc }).start()
	r.waitState(StateRequested, true)
	if s := r.c.Server(); s == nil || s.Port != lp {
		t.Fatalf("chose %+v, want the live server after the dead one failed", s)
	}
	sk, _ := r.c.skips.snapshot(r.clk.Now())
	if until, ok := skippedUntil(sk, Server{Host: dh, Port: dp}); !ok || until.Sub(r.clk.Now()) != SkipUnreachable {
		t.Fatalf("dead server not skipped for 5 minutes: %v", sk)
	}
	// GET /sk/servers tells the two apart although neither has a self.
	doc := r.c.Servers()
	if len(doc.Servers) != 2 || doc.Servers[0].SkippedS != 300 || doc.Servers[0].Chosen ||
		doc.Servers[1].SkippedS != 0 || !doc.Servers[1].Chosen {
		t.Fatalf("servers %+v", doc.Servers)
	}
	// The pending request belongs to the live server: it stays chosen after the skip ends.
	r.clk.Advance(SkipUnreachable)
	time.Sleep(20 * time.Millisecond)
	if s := r.c.Server(); s == nil || s.Port != lp {
		t.Fatalf("left the server of the pending request: %+v", s)
	}
}

// One server advertised as both _signalk-http._tcp and _signalk-https._tcp is spoken to over
// https, whatever order discovery lists them in and whichever rule picks it.
func TestChoosePrefersHTTPS(t *testing.T) {
	plain := Server{Self: "urn:a", Host: "10.0.0.1", Port: 3000, Scheme: "http", Roles: []string{"master"}}
	secure := Server{Self: "urn:a", Host: "10.0.0.1", Port: 3443, Scheme: "https", Roles: []string{"master"}}
	other := Server{Self: "urn:b", Host: "10.0.0.2", Port: 3000, Scheme: "http"}
	noSelfPlain := Server{Host: "10.0.0.5", Port: 80, Scheme: "http"}
	noSelfSecure := Server{Host: "10.0.0.5", Port: 443, Scheme: "https"}
	cur := plain
	cur.Source = "discovered"
	for _, tc := range []struct {
		name string
		in   choiceInput
		want int // port
	}{
		{"master", choiceInput{discovered: []Server{plain, secure, other}}, 3443},
		{"master, https listed first", choiceInput{discovered: []Server{secure, plain, other}}, 3443},
		{"server_self", choiceInput{self: "urn:a", discovered: []Server{plain, other, secure}}, 3443},
		{"sticky", choiceInput{discovered: []Server{other, plain, secure}, sticky: map[string]bool{"urn:a": true}}, 3443},
		{"sticky last choice", choiceInput{discovered: []Server{plain, secure}, current: &cur, sticky: map[string]bool{"urn:a": true}}, 3443},
		{"pinned", choiceInput{pin: true, current: &cur, discovered: []Server{plain, secure}}, 3443},
		{"any, no self", choiceInput{discovered: []Server{noSelfPlain, noSelfSecure}}, 443},
		{"http only stays http", choiceInput{discovered: []Server{plain}}, 3000},
		{"sk.scheme http keeps the http port", choiceInput{plain: true, discovered: []Server{secure, plain, other}}, 3000},
		{"sk.scheme http, https only", choiceInput{plain: true, discovered: []Server{secure}}, 3443},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(tc.in)
			if got == nil || got.Port != tc.want {
				t.Fatalf("chose %+v, want port %d", got, tc.want)
			}
		})
	}
	// Two servers without a self on different hosts are both kept.
	if l := oneScheme([]Server{noSelfPlain, {Host: "10.0.0.6", Port: 443, Scheme: "https"}}, true); len(l) != 2 {
		t.Fatalf("oneScheme merged different hosts: %+v", l)
	}
}

// sk.scheme http with a server advertised both ways dials the http advertisement's port, not
// plain http to the TLS port.
func TestForcedHTTPUsesTheHTTPAdvertisement(t *testing.T) {
	plain := Server{Self: "urn:a", Host: "10.0.0.1", Port: 3000, Scheme: "http"}
	secure := Server{Self: "urn:a", Host: "10.0.0.1", Port: 3443, Scheme: "https"}
	r := newRig(t, nil, func(o *Options) { o.Discovery = newFakeDiscovery(secure, plain) })
	r.cfg.Set("sk", "scheme", "http")
	r.start()
	eventually(t, "a choice", func() bool { return r.c.Server() != nil })
	if s := r.c.Server(); s.Scheme != "http" || s.Port != 3000 {
		t.Fatalf("chose %s://%s, want http on port 3000", s.Scheme, s.Addr())
	}
}
