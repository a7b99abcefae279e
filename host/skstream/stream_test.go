package skstream

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
	"devhost/host/skstream/skpeer"
)

// pump reads the next frame, advancing the fake clock by step while none arrives (for paced
// drains where the exact timer count does not matter to the test).
func (f *fixture) pump(c *skpeer.Conn, step time.Duration) []byte {
	f.t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case b := <-c.Frames():
			return b
		case <-time.After(10 * time.Millisecond):
			f.clk.Advance(step)
		}
	}
	f.t.Fatal("no frame while pumping the clock")
	return nil
}

func deltaValues(t *testing.T, b []byte) []string {
	t.Helper()
	var d wireDelta
	if err := json.Unmarshal(b, &d); err != nil || len(d.Updates) != 1 {
		t.Fatalf("not a delta: %s", b)
	}
	return d.values()
}

func TestPublishBeforeStartIsInvalidState(t *testing.T) {
	s := New(Options{Clock: clockwork.NewFakeClock(), Settings: DefaultSettings()})
	defer s.Close()
	calls := map[string]func() error{
		"number": func() error { return s.PublishNumber("a.b", 1) },
		"string": func() error { return s.PublishString("a.b", "x") },
		"bool":   func() error { return s.PublishBool("a.b", true) },
		"json":   func() error { return s.PublishJSON("a.b", []byte(`{"x":1}`)) },
		"any":    func() error { return s.Publish("a.b", 2) },
		"values": func() error {
			return s.PublishValues(sk.Value{Path: "a.b", Value: 1}, sk.Value{Path: "c.d", Value: "x"})
		},
		"raw": func() error { return s.SendRaw([]byte(`{"x":1}`)) },
	}
	for name, fn := range calls {
		if err := fn(); !errors.Is(err, ErrInvalidState) {
			t.Errorf("%s before start: %v, want ErrInvalidState", name, err)
		}
	}
	if err := s.Flush(context.Background(), time.Second); !errors.Is(err, ErrInvalidState) {
		t.Errorf("flush before start: %v", err)
	}
	if _, err := s.Put("a.b", 1, nil); !errors.Is(err, ErrInvalidState) {
		t.Errorf("put before start: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, fn := range calls {
		if err := fn(); err != nil {
			t.Errorf("%s after start: %v", name, err)
		}
	}
	if err := s.Start(context.Background()); !errors.Is(err, ErrInvalidState) {
		t.Errorf("second start: %v", err)
	}
	s.Close()
	if err := s.PublishNumber("a.b", 1); !errors.Is(err, ErrInvalidState) {
		t.Errorf("publish after close: %v", err)
	}
}

func TestPublishRefusesBadInput(t *testing.T) {
	f := newFixture(t)
	cases := map[string]error{
		"empty path":      f.s.PublishNumber("", 1),
		"space in path":   f.s.PublishNumber("a b", 1),
		"empty segment":   f.s.PublishNumber("a..b", 1),
		"wildcard":        f.s.PublishNumber("a.*", 1),
		"not json":        f.s.PublishJSON("a.b", []byte(`{nope`)),
		"too large":       f.s.PublishString("a.b", strings.Repeat("x", MaxMessageBytes)),
		"unmarshallable":  f.s.Publish("a.b", func() {}),
		"values not json": f.s.PublishValues(sk.Value{Path: "a.b", Value: 1}, sk.Value{Path: "c.d", Value: json.RawMessage(`{`)}),
		"raw not json":    f.s.SendRaw([]byte("hello")),
	}
	for name, err := range cases {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	f.clk.Advance(time.Second)
	if st := f.s.Status(); st.Buffered != 0 {
		t.Fatalf("refused values were queued: %+v", st)
	}
}

func TestBatchWindowCoalescesAndLastValueWins(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	must(t, f.s.PublishNumber("navigation.speedOverGround", 1))
	must(t, f.s.PublishString("dev.probe.mode", "auto"))
	must(t, f.s.PublishNumber("navigation.speedOverGround", 3.5))
	must(t, f.s.PublishBool("dev.probe.ok", true))
	must(t, f.s.PublishJSON("dev.probe.obj", []byte(` {"a":[1,2]} `)))
	must(t, f.s.Publish("dev.probe.nil", nil))
	f.advance(1, 99*time.Millisecond)
	c.ExpectNone(t)
	f.advance(1, time.Millisecond)
	d := nextDelta(t, c)
	if d.Context != "vessels.self" || d.Updates[0].Source.Label != "dev.probe-1" {
		t.Fatalf("context/label: %+v", d)
	}
	if d.Updates[0].Timestamp != nil {
		t.Fatalf("timestamp without a wall clock: %s", *d.Updates[0].Timestamp)
	}
	want := []string{"navigation.speedOverGround=3.5", `dev.probe.mode="auto"`, "dev.probe.ok=true",
		`dev.probe.obj={"a":[1,2]}`, "dev.probe.nil=null"}
	if got := d.values(); !slices.Equal(got, want) {
		t.Fatalf("values %v, want %v", got, want)
	}
	// The next window starts with the next value, not before.
	must(t, f.s.PublishNumber("a.b", 2))
	f.advance(1, 100*time.Millisecond)
	if got := nextDelta(t, c).values(); !slices.Equal(got, []string{"a.b=2"}) {
		t.Fatalf("second window %v", got)
	}
	eventually(t, "sent 2", func() bool { return f.s.Status().Sent == 2 })
}

func TestPublishValuesShareOneBatch(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	c := f.connect()
	must(t, f.s.PublishValues(sk.Value{Path: "a.b", Value: 1}, sk.Value{Path: "c.d", Value: "x"}, sk.Value{Path: "a.b", Value: 2}))
	if got := nextDelta(t, c).values(); !slices.Equal(got, []string{"a.b=2", `c.d="x"`}) {
		t.Fatalf("values %v", got)
	}
}

func TestBatchMSZeroSendsEachValue(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	c := f.connect()
	must(t, f.s.PublishNumber("a.b", 1))
	must(t, f.s.PublishNumber("a.b", 2))
	for _, want := range []string{"a.b=1", "a.b=2"} {
		if got := nextDelta(t, c).values(); !slices.Equal(got, []string{want}) {
			t.Fatalf("got %v, want %s", got, want)
		}
	}
}

func TestTimestamps(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.FixedZone("x", 3600))
	cases := []struct {
		name    string
		on      bool
		clockOK bool
		want    string
	}{
		{"on and clock set", true, true, "2024-05-06T06:08:09.123Z"},
		{"on, clock not set", true, false, ""},
		{"off, clock set", false, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withSettings(func(s *Settings) { s.Timestamps = tc.on }), func(o *Options) {
				o.WallClock = func() (time.Time, bool) {
					if !tc.clockOK {
						return time.Time{}, false
					}
					return at, true
				}
			})
			c := f.connect()
			must(t, f.s.PublishNumber("a.b", 1))
			f.advance(1, 100*time.Millisecond)
			d := nextDelta(t, c)
			got := ""
			if d.Updates[0].Timestamp != nil {
				got = *d.Updates[0].Timestamp
			}
			if got != tc.want {
				t.Fatalf("timestamp %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRingBoundedByMessagesDropsOldest(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.BufferMsgs, s.DrainPerS = 0, 3, 1000 }))
	for i := 1; i <= 5; i++ {
		must(t, f.s.PublishNumber("p.n", float64(i)))
	}
	st := f.s.Status()
	if st.Buffered != 3 || st.Dropped != 2 || st.State != StateNoTarget {
		t.Fatalf("status %+v", st)
	}
	eventually(t, "a drop report", func() bool { s, _ := f.lastStatus(); return s.Dropped > 0 })
	c := f.connect()
	for _, want := range []string{"p.n=3", "p.n=4", "p.n=5"} {
		if got := deltaValues(t, f.pump(c, time.Millisecond)); !slices.Equal(got, []string{want}) {
			t.Fatalf("got %v, want %s", got, want)
		}
	}
}

func TestRingBoundedByBytes(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.BufferKB = 0, 1 }))
	big := strings.Repeat("x", 300)
	for i := 0; i < 5; i++ {
		must(t, f.s.PublishString("p.s", big))
	}
	st := f.s.Status()
	if st.BufferedBytes > 1024 || st.Buffered != 2 || st.Dropped != 3 {
		t.Fatalf("status %+v", st)
	}
}

func TestSettingsShrinkTrimsRing(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	for i := 0; i < 10; i++ {
		must(t, f.s.PublishNumber("p.n", float64(i)))
	}
	set := DefaultSettings()
	set.BatchMS, set.BufferMsgs = 0, 4
	f.s.SetSettings(set)
	if st := f.s.Status(); st.Buffered != 4 || st.Dropped != 6 {
		t.Fatalf("status %+v", st)
	}
}

func TestDrainRateWithNewValuesBehindBacklog(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.DrainPerS = 0, 2 }))
	for i := 1; i <= 3; i++ {
		must(t, f.s.PublishNumber("p.n", float64(i)))
	}
	c := f.connect()
	if got := nextDelta(t, c).values(); got[0] != "p.n=1" {
		t.Fatalf("first %v", got)
	}
	must(t, f.s.PublishNumber("p.new", 9)) // behind the backlog
	c.ExpectNone(t)
	f.advance(1, 499*time.Millisecond)
	c.ExpectNone(t)
	for _, want := range []string{"p.n=2", "p.n=3", "p.new=9"} {
		if want != "p.n=2" {
			f.advance(1, 499*time.Millisecond)
			c.ExpectNone(t)
		}
		f.advance(1, time.Millisecond)
		if got := nextDelta(t, c).values(); got[0] != want {
			t.Fatalf("got %v, want %s", got, want)
		}
	}
	// Backlog gone: live values go out at once again.
	eventually(t, "drain finished", func() bool { return !f.s.Status().Draining })
	must(t, f.s.PublishNumber("p.live", 1))
	if got := nextDelta(t, c).values(); got[0] != "p.live=1" {
		t.Fatalf("live %v", got)
	}
}

func TestRawFramesGoAheadOfBufferedDeltas(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.DrainPerS = 0, 1 }))
	must(t, f.s.PublishNumber("p.n", 1))
	must(t, f.s.PublishNumber("p.n", 2))
	must(t, f.s.SendRaw([]byte(` {"raw":1} `)))
	c := f.connect()
	if b := c.Next(t); string(b) != `{"raw":1}` {
		t.Fatalf("first frame %s, want the raw one", b)
	}
	if got := nextDelta(t, c).values(); got[0] != "p.n=1" {
		t.Fatalf("second %v", got)
	}
	// While the backlog drains, a raw frame still jumps the queue.
	must(t, f.s.SendRaw([]byte(`{"raw":2}`)))
	if b := c.Next(t); string(b) != `{"raw":2}` {
		t.Fatalf("raw during drain: %s", b)
	}
	f.advance(1, time.Second)
	if got := nextDelta(t, c).values(); got[0] != "p.n=2" {
		t.Fatalf("third %v", got)
	}
}

func TestFlushOutcomes(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		f := newFixture(t)
		c := f.connect()
		must(t, f.s.PublishNumber("a.b", 1))
		if err := f.s.Flush(context.Background(), time.Second); err != nil {
			t.Fatalf("flush: %v", err)
		}
		if got := nextDelta(t, c).values(); got[0] != "a.b=1" {
			t.Fatalf("flushed %v", got)
		}
		if st := f.s.Status(); st.Buffered != 0 || st.Sent != 1 {
			t.Fatalf("after flush %+v", st)
		}
	})
	t.Run("invalid state when down", func(t *testing.T) {
		f := newFixture(t)
		must(t, f.s.PublishNumber("a.b", 1))
		if err := f.s.Flush(context.Background(), time.Second); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("flush down: %v", err)
		}
	})
	// paced is a stream sending one delta a second with three to send, the first received.
	paced := func(t *testing.T) (*fixture, *skpeer.Conn) {
		f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.DrainPerS = 0, 1 }))
		for i := 0; i < 3; i++ {
			must(t, f.s.PublishNumber("p.n", float64(i)))
		}
		c := f.connect()
		nextDelta(t, c)
		return f, c
	}
	t.Run("timeout", func(t *testing.T) {
		f, _ := paced(t)
		res := make(chan error, 1)
		go func() { res <- f.s.Flush(context.Background(), 1500*time.Millisecond) }()
		f.advance(2, 1500*time.Millisecond) // pacing timer (1 s) and the flush deadline
		if err := result(t, res, "flush"); !errors.Is(err, ErrTimeout) {
			t.Fatalf("flush: %v, want ErrTimeout", err)
		}
		if st := f.s.Status(); st.Buffered == 0 {
			t.Fatalf("nothing left although the flush timed out: %+v", st)
		}
	})
	t.Run("invalid state when the stream drops while waiting", func(t *testing.T) {
		f, c := paced(t)
		res := make(chan error, 1)
		go func() { res <- f.s.Flush(context.Background(), time.Hour) }()
		time.Sleep(20 * time.Millisecond)
		c.WS.Close()
		if err := result(t, res, "flush"); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("flush: %v, want ErrInvalidState", err)
		}
	})
}

func TestConnectRequest(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	r := c.Req
	if got := r.Header.Get("Authorization"); got != "Bearer tok-123" {
		t.Fatalf("Authorization %q", got)
	}
	if r.URL.Path != "/signalk/v1/stream" || r.URL.RawQuery != "subscribe=none" {
		t.Fatalf("request %s?%s", r.URL.Path, r.URL.RawQuery)
	}
	if strings.Contains(r.URL.RawQuery, "tok-123") {
		t.Fatal("token in the query string")
	}
	// With a subscription the next connection asks for meta; without a token no header.
	cancel, err := f.s.Subscribe("navigation.*", func(sk.Delta) {})
	must(t, err)
	defer cancel()
	c.Next(t) // the incremental subscribe
	f.s.SetTarget(&Target{URL: "http://" + f.p.Addr()})
	c2 := f.p.Accept(t)
	if c2.Req.URL.RawQuery != "subscribe=none&sendMeta=all" {
		t.Fatalf("query %q", c2.Req.URL.RawQuery)
	}
	if _, ok := c2.Req.Header["Authorization"]; ok {
		t.Fatal("Authorization sent without a token")
	}
}

func TestStreamURL(t *testing.T) {
	cases := []struct {
		in, want string
		meta     bool
		tls      bool
		bad      bool
	}{
		{in: "ws://10.0.0.5:3000", want: "ws://10.0.0.5:3000/signalk/v1/stream?subscribe=none"},
		{in: "http://boat.local", want: "ws://boat.local:80/signalk/v1/stream?subscribe=none"},
		{in: "wss://boat.local", want: "wss://boat.local:443/signalk/v1/stream?subscribe=none&sendMeta=all", meta: true, tls: true},
		{in: "https://[::1]:3443/whatever?x=1", want: "wss://[::1]:3443/signalk/v1/stream?subscribe=none", tls: true},
		{in: "ftp://x", bad: true},
		{in: "ws://", bad: true},
		{in: "::", bad: true},
	}
	for _, tc := range cases {
		got, tls, err := streamURL(tc.in, tc.meta)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil || got != tc.want || tls != tc.tls {
			t.Errorf("%q: %q %v %v, want %q %v", tc.in, got, tls, err, tc.want, tc.tls)
		}
	}
}

func TestUnauthorizedReportedAndNotRetried(t *testing.T) {
	for _, code := range []int{401, 403} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f := newFixture(t)
			f.p.set(func(p *peer) { p.reject = code })
			f.s.SetTarget(&Target{URL: f.p.URL(), Token: "old"})
			eventually(t, "unauthorized report", func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(f.unauth) == 1
			})
			f.mu.Lock()
			u := f.unauth[0]
			f.mu.Unlock()
			if u.StatusCode != code || u.TLS || u.URL != f.p.URL() {
				t.Fatalf("report %+v", u)
			}
			if st := f.s.Status(); st.State != StateUnauthorized || st.NextRetryS != 0 {
				t.Fatalf("status %+v", st)
			}
			f.clk.Advance(time.Hour)
			time.Sleep(50 * time.Millisecond)
			if n := f.p.dials.Load(); n != 1 {
				t.Fatalf("%d dials after a %d", n, code)
			}
			// A new token lifts the stop.
			f.p.set(func(p *peer) { p.reject = 0 })
			f.s.SetTarget(&Target{URL: f.p.URL(), Token: "new"})
			c := f.p.Accept(t)
			if c.Req.Header.Get("Authorization") != "Bearer new" {
				t.Fatal("new token not used")
			}
			eventually(t, "connected", f.s.Connected)
		})
	}
}

func TestRetryLiftsUnauthorizedStop(t *testing.T) {
	f := newFixture(t)
	f.p.set(func(p *peer) { p.reject = 401 })
	f.s.SetTarget(&Target{URL: f.p.URL(), Token: "t"})
	eventually(t, "unauthorized", func() bool { return f.s.Status().State == StateUnauthorized })
	f.p.set(func(p *peer) { p.reject = 0 })
	f.s.Retry()
	f.p.Accept(t)
	eventually(t, "connected", f.s.Connected)
}

func TestCertErrorStopsDialing(t *testing.T) {
	certErr := errors.New("x509: certificate signed by unknown authority")
	var reports, dials atomic.Int32
	f := newFixture(t, func(o *Options) {
		o.IsCertError = func(err error) bool { return errors.Is(err, certErr) }
		o.OnCertError = func(err error) { reports.Add(1) }
	})
	f.s.SetTarget(&Target{URL: "wss://" + f.p.Addr(),
		DialTLS: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return nil, certErr
		}})
	eventually(t, "cert_error state", func() bool { return f.s.Status().State == StateCertError })
	f.clk.Advance(time.Hour)
	time.Sleep(50 * time.Millisecond)
	if n, r := dials.Load(), reports.Load(); n != 1 || r != 1 {
		t.Fatalf("%d dials, %d reports", n, r)
	}
}

func TestBackoffCurve(t *testing.T) {
	maxD := 300 * time.Second
	cases := []struct {
		round int
		j     float64
		want  time.Duration
	}{
		{0, 0, time.Second},
		{1, 0, 2 * time.Second},
		{5, 0, 32 * time.Second},
		{8, 0, 256 * time.Second},
		{9, 0, 300 * time.Second},
		{60, 0, 300 * time.Second},
		{0, 1, 1250 * time.Millisecond},
		{0, -1, 750 * time.Millisecond},
		{9, 1, 375 * time.Second},
		{2, 5, 5 * time.Second}, // jitter clamped to ±25 %
	}
	for _, tc := range cases {
		if got := backoff(tc.round, maxD, tc.j); got != tc.want {
			t.Errorf("round %d jitter %v: %v, want %v", tc.round, tc.j, got, tc.want)
		}
	}
}

func TestBackoffBetweenFailedAttempts(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BackoffMaxS = 4 }))
	f.p.set(func(p *peer) { p.reject = 500 })
	f.s.SetTarget(&Target{URL: f.p.URL(), Token: "t"})
	eventually(t, "first attempt", func() bool { return f.p.dials.Load() == 1 })
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		eventually(t, "backoff state", func() bool { return f.s.Status().State == StateBackoff })
		if st := f.s.Status(); st.NextRetryS != int(d/time.Second) || !strings.Contains(st.LastError, "500") {
			t.Fatalf("round %d: status %+v", i, st)
		}
		f.advance(1, d-time.Millisecond)
		time.Sleep(30 * time.Millisecond)
		if n := f.p.dials.Load(); n != int32(i+1) {
			t.Fatalf("round %d: dialed early (%d)", i, n)
		}
		f.advance(1, time.Millisecond)
		eventually(t, "next attempt", func() bool { return f.p.dials.Load() == int32(i+2) })
	}
}

func TestBackoffJitterApplied(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Jitter = func() float64 { return 1 } })
	f.p.set(func(p *peer) { p.reject = 502 })
	f.s.SetTarget(&Target{URL: f.p.URL()})
	eventually(t, "backoff", func() bool { return f.s.Status().State == StateBackoff })
	f.advance(1, 1249*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	if f.p.dials.Load() != 1 {
		t.Fatal("dialed before 1.25 s")
	}
	f.advance(1, time.Millisecond)
	eventually(t, "second attempt", func() bool { return f.p.dials.Load() == 2 })
}

func TestWSEnabledFalseClosesSocketAndKeepsBuffering(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	set := DefaultSettings()
	set.WSEnabled = false
	f.s.SetSettings(set)
	c.WaitClosed(t)
	eventually(t, "disabled", func() bool { return f.s.Status().State == StateDisabled })
	must(t, f.s.PublishNumber("a.b", 7))
	f.advance(1, 100*time.Millisecond)
	eventually(t, "one buffered message", func() bool { return f.s.Status().Buffered == 1 })
	f.clk.Advance(time.Hour)
	f.p.ExpectNoConn(t)
	set.WSEnabled = true
	f.s.SetSettings(set)
	c2 := f.p.Accept(t)
	if got := nextDelta(t, c2).values(); got[0] != "a.b=7" {
		t.Fatalf("buffered %v", got)
	}
}

func TestNetworkEvents(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	f.s.NetworkChanged()
	c.WaitClosed(t)
	c2 := f.p.Accept(t) // at once, no clock needed
	eventually(t, "connected again", f.s.Connected)
	f.s.NetworkDown()
	c2.WaitClosed(t)
	eventually(t, "network_down", func() bool { return f.s.Status().State == StateNetworkDown })
	must(t, f.s.PublishNumber("a.b", 1))
	f.advance(1, 100*time.Millisecond)
	f.clk.Advance(time.Hour)
	f.p.ExpectNoConn(t)
	f.s.NetworkUp()
	c3 := f.p.Accept(t)
	if got := nextDelta(t, c3).values(); got[0] != "a.b=1" {
		t.Fatalf("buffered %v", got)
	}
	if st := f.s.Status(); st.Reconnects != 2 {
		t.Fatalf("reconnects %d", st.Reconnects)
	}
}

func TestHealthHooks(t *testing.T) {
	f := newFixture(t)
	if worked, since := f.s.Health(); worked || !since.IsZero() {
		t.Fatalf("before connect %v %v", worked, since)
	}
	c := f.connect()
	if worked, since := f.s.Health(); !worked || !since.IsZero() {
		t.Fatalf("connected %v %v", worked, since)
	}
	f.clk.Advance(time.Minute)
	down := f.clk.Now()
	c.WS.Close()
	eventually(t, "down", func() bool { return !f.s.Connected() })
	if worked, since := f.s.Health(); !worked || !since.Equal(down) {
		t.Fatalf("down %v %v, want %v", worked, since, down)
	}
}

func TestStatusEventsAndDocument(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	eventually(t, "connected event", func() bool { s, _ := f.lastStatus(); return s.Connected })
	c.WS.Close()
	eventually(t, "disconnected event", func() bool {
		s, _ := f.lastStatus()
		return !s.Connected && s.State == StateBackoff && s.LastError != ""
	})
	b, err := json.Marshal(f.s.Status())
	must(t, err)
	var doc map[string]any
	must(t, json.Unmarshal(b, &doc))
	for _, k := range []string{"connected", "sent", "buffered", "dropped", "next_retry_s", "meta", "in", "put"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("ws.%s missing in %s", k, b)
		}
	}
	sub := map[string][]string{"meta": {"declared", "reconciled"}, "in": {"subs", "frames", "received"},
		"put": {"pending", "ok", "failed"}}
	for obj, keys := range sub {
		m, _ := doc[obj].(map[string]any)
		for _, k := range keys {
			if _, ok := m[k]; !ok {
				t.Errorf("ws.%s.%s missing in %s", obj, k, b)
			}
		}
	}
}

func TestCloseEndsEverything(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	done := make(chan sk.PutAnswer, 1)
	_, err := f.s.Put("a.b", 1, func(r sk.PutAnswer) { done <- r })
	must(t, err)
	c.Next(t)
	f.s.Close()
	c.WaitClosed(t)
	select {
	case r := <-done:
		if r.State != "FAILED" {
			t.Fatalf("put after close %+v", r)
		}
	case <-time.After(wait):
		t.Fatal("pending PUT not ended by Close")
	}
	if st := f.s.Status(); st.State != StateStopped {
		t.Fatalf("state %s", st.State)
	}
}

func TestContextCancelCloses(t *testing.T) {
	s := New(Options{Clock: clockwork.NewFakeClock(), Settings: DefaultSettings()})
	ctx, cancel := context.WithCancel(context.Background())
	must(t, s.Start(ctx))
	cancel()
	eventually(t, "closed", func() bool { return s.Status().State == StateStopped })
	s.Close()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestTLSTargets(t *testing.T) {
	f := newFixture(t)
	tp := newPeerTLS(t, true)
	addr := tp.Addr()
	roots := tp.ClientTLS()

	// wss with a TLS configuration.
	f.s.SetTarget(&Target{URL: "wss://" + addr, Token: "t", TLSConfig: roots})
	c := tp.Accept(t)
	eventually(t, "connected over TLS", f.s.Connected)
	if c.Req.TLS == nil || c.Req.Header.Get("Authorization") != "Bearer t" {
		t.Fatal("not a TLS upgrade with the token")
	}

	// wss through the caller's dialer; Proven sees the connection after the 101.
	proven := make(chan net.Conn, 1)
	f.s.SetTarget(&Target{URL: "https://" + addr, Token: "t",
		DialTLS: func(ctx context.Context, network, a string) (net.Conn, error) {
			var d tls.Dialer
			d.Config = roots
			return d.DialContext(ctx, network, a)
		},
		Proven: func(c net.Conn) { proven <- c },
	})
	tp.Accept(t)
	select {
	case pc := <-proven:
		if _, ok := pc.(*tls.Conn); !ok {
			t.Fatalf("Proven got %T", pc)
		}
	case <-time.After(wait):
		t.Fatal("Proven not called")
	}
	eventually(t, "connected through DialTLS", f.s.Connected)

	// A certificate the configuration does not trust: an ordinary failure without IsCertError.
	f.s.SetTarget(&Target{URL: "wss://" + addr, TLSConfig: &tls.Config{}})
	eventually(t, "backoff after an untrusted certificate", func() bool {
		st := f.s.Status()
		return st.State == StateBackoff && strings.Contains(st.LastError, "certificate")
	})
}

// TestPublishDoesNotWaitForStalledSocket: the server stops reading, the writer blocks in the
// socket, and publishing goes on into the ring, which drops its oldest messages.
func TestPublishDoesNotWaitForStalledSocket(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	f.p.SetStall(true)
	f.connect()
	value := strings.Repeat("v", 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 40000; i++ {
			_ = f.s.PublishString("dev.fill", value)
		}
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Publish blocked behind a stalled socket")
	}
	st := f.s.Status()
	if st.Dropped == 0 || st.Sent >= 40000 || !st.Connected {
		t.Fatalf("status %+v", st)
	}
}

// A delta buffer the socket is done with carries the next batch: at full speed the stream
// allocates no message buffers, and the reused buffer never leaks the old frame's bytes.
func TestWrittenDeltaBufferIsReused(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	c := f.connect()
	spare := func() []unsafe.Pointer {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		var ps []unsafe.Pointer
		for _, b := range f.s.spare {
			ps = append(ps, unsafe.Pointer(unsafe.SliceData(b)))
		}
		return ps
	}
	must(t, f.s.PublishString("a.long.path.name", strings.Repeat("x", 200)))
	if got := nextDelta(t, c).values(); len(got) != 1 || !strings.HasPrefix(got[0], "a.long.path.name=") {
		t.Fatalf("first delta %v", got)
	}
	eventually(t, "the written buffer kept", func() bool { return len(spare()) == 1 })
	first := spare()[0]
	must(t, f.s.PublishNumber("a.b", 2))
	if got := nextDelta(t, c).values(); !slices.Equal(got, []string{"a.b=2"}) {
		t.Fatalf("second delta %v", got)
	}
	eventually(t, "the same buffer back", func() bool { s := spare(); return len(s) == 1 && s[0] == first })
	for i := range 2 * maxSpare {
		must(t, f.s.PublishNumber("a.b", float64(i)))
		nextDelta(t, c)
	}
	eventually(t, "spares bounded", func() bool {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		held := f.s.ring.bytes
		for _, b := range f.s.spare {
			held += cap(b)
		}
		return len(f.s.spare) >= 1 && (len(f.s.spare) <= maxSpare || held <= f.s.set.BufferKB*1024)
	})
}
