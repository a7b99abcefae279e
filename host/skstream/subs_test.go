package skstream

import (
	"devhost/host/sk"
	"devhost/host/skstream/skpeer"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// subFrame decodes a subscribe frame to its paths, checking the row shape.
func subFrame(t *testing.T, b []byte) []string {
	t.Helper()
	var f struct {
		Context   string `json:"context"`
		Subscribe []struct {
			Path      string `json:"path"`
			Period    *int   `json:"period"`
			Format    string `json:"format"`
			Policy    string `json:"policy"`
			MinPeriod *int   `json:"minPeriod"`
		} `json:"subscribe"`
	}
	if err := json.Unmarshal(b, &f); err != nil || f.Context != "vessels.self" || len(f.Subscribe) == 0 {
		t.Fatalf("not a subscribe frame: %s", b)
	}
	var paths []string
	for _, r := range f.Subscribe {
		if r.Period == nil || r.MinPeriod == nil || r.Format != "delta" || r.Policy != "instant" {
			t.Fatalf("row shape: %s", b)
		}
		paths = append(paths, r.Path)
	}
	return paths
}

func isUnsubscribeAll(b []byte) bool {
	return string(b) == `{"context":"*","unsubscribe":[{"path":"*"}]}`
}

func TestSubscriptionsIncrementalAndResent(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	nop := func(sk.Delta) {}

	cancelPos, err := f.s.Subscribe("navigation.position", nop)
	must(t, err)
	if got := subFrame(t, c.Next(t)); !slices.Equal(got, []string{"navigation.position"}) {
		t.Fatalf("first subscribe %v", got)
	}
	// A broader family replaces the covered exact path on the server.
	cancelNav, err := f.s.Subscribe("navigation.*", nop)
	must(t, err)
	if b := c.Next(t); !isUnsubscribeAll(b) {
		t.Fatalf("want unsubscribe, got %s", b)
	}
	if got := subFrame(t, c.Next(t)); !slices.Equal(got, []string{"navigation.*"}) {
		t.Fatalf("resubscribe %v", got)
	}
	// Covered by navigation.*: nothing to send.
	cancelSog, err := f.s.Subscribe("navigation.speedOverGround", nop)
	must(t, err)
	c.ExpectNone(t)
	// New family: incremental.
	_, err = f.s.Subscribe("environment*", nop)
	must(t, err)
	if got := subFrame(t, c.Next(t)); !slices.Equal(got, []string{"environment*"}) {
		t.Fatalf("incremental %v", got)
	}
	// Same pattern twice is one server subscription.
	cancelEnv2, err := f.s.Subscribe("environment*", nop)
	must(t, err)
	c.ExpectNone(t)
	cancelEnv2()
	c.ExpectNone(t)
	// Removing a covered pattern sends nothing.
	cancelSog()
	cancelSog() // idempotent
	c.ExpectNone(t)
	// Removing the family: unsubscribe, then what is still needed.
	cancelNav()
	if b := c.Next(t); !isUnsubscribeAll(b) {
		t.Fatalf("want unsubscribe, got %s", b)
	}
	if got := subFrame(t, c.Next(t)); !slices.Equal(got, []string{"environment*", "navigation.position"}) {
		t.Fatalf("after removal %v", got)
	}
	if st := f.s.Status(); st.In.Subs != 3-1 {
		t.Fatalf("subs %d", st.In.Subs)
	}
	// Reconnect: the whole set goes out first, and the URL asks for meta.
	f.s.NetworkChanged()
	c2 := f.p.Accept(t)
	if got := subFrame(t, c2.Next(t)); !slices.Equal(got, []string{"environment*", "navigation.position"}) {
		t.Fatalf("after reconnect %v", got)
	}
	if !strings.Contains(c2.Req.URL.RawQuery, "sendMeta=all") {
		t.Fatalf("query %q", c2.Req.URL.RawQuery)
	}
	cancelPos()
	if b := c2.Next(t); !isUnsubscribeAll(b) {
		t.Fatalf("want unsubscribe, got %s", b)
	}
	if got := subFrame(t, c2.Next(t)); !slices.Equal(got, []string{"environment*"}) {
		t.Fatalf("after the last exact path went %v", got)
	}
}

func TestSubscriptionLimitAndPatterns(t *testing.T) {
	f := newFixture(t)
	var cancels []func()
	for i := 0; i < MaxSubscriptions; i++ {
		c, err := f.s.Subscribe(fmt.Sprintf("dev.p%d", i), func(sk.Delta) {})
		must(t, err)
		cancels = append(cancels, c)
	}
	if _, err := f.s.Subscribe("dev.one.more", func(sk.Delta) {}); !errors.Is(err, ErrLimit) {
		t.Fatalf("49th: %v", err)
	}
	cancels[0]()
	if _, err := f.s.Subscribe("dev.one.more", func(sk.Delta) {}); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
	for _, bad := range []string{"", "a*b", "*a", "a..b", "a.**", "a b", ".a"} {
		if _, err := f.s.Subscribe(bad, func(sk.Delta) {}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("pattern %q: %v", bad, err)
		}
	}
	if _, err := f.s.Subscribe("a.b", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("nil callback: %v", err)
	}
}

func TestLastUnsubscribeSendsUnsubscribeOnly(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	cancel, err := f.s.Subscribe("a.*", func(sk.Delta) {})
	must(t, err)
	c.Next(t)
	cancel()
	if b := c.Next(t); !isUnsubscribeAll(b) {
		t.Fatalf("got %s", b)
	}
	c.ExpectNone(t)
}

// collector records deltas.
type collector struct{ recorder[sk.Delta] }

// connectSubscribed subscribes a collector to pattern, connects, and consumes the subscribe
// frame the connection opens with.
func (f *fixture) connectSubscribed(pattern string) (*collector, *skpeer.Conn) {
	f.t.Helper()
	got := &collector{}
	_, err := f.s.Subscribe(pattern, got.add)
	must(f.t, err)
	c := f.connect()
	c.Next(f.t)
	return got, c
}

func (c *collector) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, d := range c.items {
		p := d.Path
		if d.Meta {
			p = "meta:" + p
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func TestInboundDeltasMatchedToSubscribers(t *testing.T) {
	f := newFixture(t)
	var nav, wind, all collector
	for pat, col := range map[string]*collector{"navigation.*": &nav, "environment.wind.speedApparent": &wind, "*": &all} {
		_, err := f.s.Subscribe(pat, col.add)
		must(t, err)
	}
	c := f.connect()
	c.Next(t) // subscribe
	c.Send(t, `{"context":"vessels.urn:mrn:signalk:uuid:x","updates":[{"$source":"nmea.II","timestamp":"2024-01-01T00:00:00Z",
		"values":[{"path":"navigation.speedOverGround","value":3.2},{"path":"environment.wind.speedApparent","value":5},{"path":"electrical.x","value":{"a":1}}],
		"meta":[{"path":"navigation.speedOverGround","value":{"units":"m/s"}}]}]}`)
	eventually(t, "deliveries", func() bool { return all.len() == 4 && nav.len() == 2 && wind.len() == 1 })
	if got := nav.paths(); !slices.Equal(got, []string{"meta:navigation.speedOverGround", "navigation.speedOverGround"}) {
		t.Fatalf("nav got %v", got)
	}
	wind.mu.Lock()
	d := wind.items[0]
	wind.mu.Unlock()
	if d.Context != "vessels.urn:mrn:signalk:uuid:x" || string(d.Value) != "5" || d.Source != "nmea.II" ||
		d.Timestamp != "2024-01-01T00:00:00Z" || d.Meta {
		t.Fatalf("delta %+v", d)
	}
	st := f.s.Status()
	if st.In.Frames != 1 || st.In.Received != 4 || st.In.Subs != 3 {
		t.Fatalf("in %+v", st.In)
	}
}

func TestInboundFrameSizeCap(t *testing.T) {
	f := newFixture(t)
	got, c := f.connectSubscribed("big.*")
	frame := func(total int) string {
		head, tail := `{"updates":[{"values":[{"path":"big.x","value":"`, `"}]}]}`
		return head + strings.Repeat("y", total-len(head)-len(tail)) + tail
	}
	c.Send(t, frame(MaxFrameBytes+1))
	c.Send(t, frame(MaxFrameBytes)) // exactly the cap is accepted
	c.Send(t, frame(200*1024))      // far over: read through and dropped
	c.Send(t, `{"updates":[{"values":[{"path":"big.y","value":1}]}]}`)
	eventually(t, "two deliveries", func() bool { return got.len() == 2 })
	if p := got.paths(); !slices.Equal(p, []string{"big.x", "big.y"}) {
		t.Fatalf("delivered %v", p)
	}
	st := f.s.Status()
	if st.In.Oversize != 2 || st.In.Frames != 4 || !st.Connected {
		t.Fatalf("status %+v", st)
	}
}

// A frame far beyond any sane size is dropped like any other oversized frame: the connection
// stays up and the next frame is delivered.
func TestHugeInboundFrameKeepsConnection(t *testing.T) {
	f := newFixture(t)
	got, c := f.connectSubscribed("big.*")
	head, tail := `{"updates":[{"values":[{"path":"big.x","value":"`, `"}]}]}`
	c.Send(t, head+strings.Repeat("y", 2<<20)+tail)
	c.Send(t, `{"updates":[{"values":[{"path":"big.y","value":1}]}]}`)
	eventually(t, "the valid delta", func() bool { return got.len() == 1 })
	if p := got.paths(); !slices.Equal(p, []string{"big.y"}) {
		t.Fatalf("delivered %v", p)
	}
	st := f.s.Status()
	if st.In.Oversize != 1 || st.In.Frames != 2 || st.In.Bad != 0 || !st.Connected || st.Reconnects != 0 {
		t.Fatalf("status %+v", st)
	}
	select {
	case <-c.Closed():
		t.Fatal("the stream closed the socket")
	default:
	}
	if n := f.p.dials.Load(); n != 1 {
		t.Fatalf("%d dials, want 1", n)
	}
	// The same connection still carries traffic both ways.
	must(t, f.s.PublishNumber("a.b", 1))
	f.advance(1, 100*time.Millisecond)
	if v := nextDelta(t, c).values(); !slices.Equal(v, []string{"a.b=1"}) {
		t.Fatalf("after the drop the stream sent %v", v)
	}
}

// sizedReader yields n bytes and records the largest read asked of it.
type sizedReader struct {
	left, largest int
	fail          error
}

func (r *sizedReader) Read(p []byte) (int, error) {
	r.largest = max(r.largest, len(p))
	if r.left == 0 {
		if r.fail != nil {
			return 0, r.fail
		}
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	for i := range p[:n] {
		p[i] = 'z'
	}
	r.left -= n
	return n, nil
}

func TestReadFrameKeepsAtMostTheCap(t *testing.T) {
	broken := errors.New("connection reset")
	cases := []struct {
		name     string
		size     int
		fail     error
		wantKept int
		wantErr  bool
	}{
		{"empty", 0, nil, 0, false},
		{"small", 10, nil, 10, false},
		{"exactly the cap", MaxFrameBytes, nil, MaxFrameBytes, false},
		{"one over", MaxFrameBytes + 1, nil, MaxFrameBytes + 1, false},
		{"64 MiB", 64 << 20, nil, MaxFrameBytes + 1, false},
		{"broken while small", 10, broken, 0, true},
		{"broken while discarding", 1 << 20, broken, 0, true},
	}
	buf := make([]byte, MaxFrameBytes+1)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &sizedReader{left: tc.size, fail: tc.fail}
			data, size, err := readFrame(r, buf)
			if tc.wantErr {
				if !errors.Is(err, broken) {
					t.Fatalf("err %v, want %v", err, broken)
				}
				return
			}
			if err != nil || size != int64(tc.size) || len(data) != tc.wantKept {
				t.Fatalf("kept %d of %d (err %v), want %d of %d", len(data), size, err, tc.wantKept, tc.size)
			}
			if r.left != 0 {
				t.Fatalf("%d bytes left unread", r.left)
			}
			// io.Discard reads in its own pooled 8 KiB chunks; nothing frame-sized is allocated.
			if r.largest > MaxFrameBytes+1 {
				t.Fatalf("a read asked for %d bytes", r.largest)
			}
		})
	}
}

func TestSlowSubscriberDoesNotBlockOthers(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	var slow, fast collector
	_, err := f.s.Subscribe("x.*", func(d sk.Delta) {
		<-release
		slow.add(d)
	})
	must(t, err)
	_, err = f.s.Subscribe("x.*", fast.add)
	must(t, err)
	c := f.connect()
	c.Next(t)
	// In steps the fast subscriber keeps up with, so only the slow one overflows.
	const n = 300
	for i := 1; i <= n; i++ {
		c.Send(t, fmt.Sprintf(`{"updates":[{"values":[{"path":"x.v","value":%d}]}]}`, i))
		if i%100 == 0 {
			eventually(t, "fast subscriber keeps up", func() bool { return fast.len() == i })
		}
	}
	releaseOnce.Do(func() { close(release) })
	eventually(t, "slow subscriber drained", func() bool {
		return slow.len()+int(f.s.Status().In.Dropped) == n
	})
	slow.mu.Lock()
	last := string(slow.items[len(slow.items)-1].Value)
	slow.mu.Unlock()
	if last != fmt.Sprint(n) || f.s.Status().In.Dropped == 0 || slow.len() > SubscriberQueue+1 {
		t.Fatalf("slow got %d (last %s), dropped %d", slow.len(), last, f.s.Status().In.Dropped)
	}
}

func TestSubscriberPanicIsContained(t *testing.T) {
	f := newFixture(t)
	var got collector
	n := 0
	_, err := f.s.Subscribe("x.v", func(d sk.Delta) {
		n++
		if n == 1 {
			panic("boom")
		}
		got.add(d)
	})
	must(t, err)
	c := f.connect()
	c.Next(t)
	c.Send(t, `{"updates":[{"values":[{"path":"x.v","value":1}]}]}`)
	c.Send(t, `{"updates":[{"values":[{"path":"x.v","value":2}]}]}`)
	eventually(t, "second delivery", func() bool { return got.len() == 1 })
	time.Sleep(10 * time.Millisecond)
	if !f.s.Connected() {
		t.Fatal("a panicking subscriber took the stream down")
	}
}

func TestCoverAndMatch(t *testing.T) {
	match := []struct {
		pat, path string
		want      bool
	}{
		{"*", "a.b", true},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "ab.c", false},
		{"a*", "ab.c", true},
		{"a*", "a", true},
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
	}
	for _, tc := range match {
		if got := matchPattern(tc.pat, tc.path); got != tc.want {
			t.Errorf("match(%q,%q) = %v", tc.pat, tc.path, got)
		}
	}
	cover := []struct {
		in, want []string
	}{
		{[]string{"a.b", "a.*"}, []string{"a.*"}},
		{[]string{"a.*", "a*"}, []string{"a*"}},
		{[]string{"a.b", "a.b", "c"}, []string{"a.b", "c"}},
		{[]string{"x.y", "*", "a*"}, []string{"*"}},
		{[]string{"ab", "a.*"}, []string{"a.*", "ab"}},
		{nil, []string{}},
	}
	for _, tc := range cover {
		if got := coverSet(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("cover(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	owners := map[string]string{"a.b": "exact", "a.*": "a.", "a.b*": "a.b", "*": "all"}
	route := []struct{ path, want string }{
		{"a.b", "exact"},
		{"a.bc", "a.b"},
		{"a.c", "a."},
		{"x", "all"},
	}
	for _, tc := range route {
		if got, ok := Route(owners, tc.path); !ok || got != tc.want {
			t.Errorf("Route(%q) = %q %v, want %q", tc.path, got, ok, tc.want)
		}
	}
	if got, ok := Route(map[string]string{"a.*": "a."}, "b"); ok {
		t.Errorf("Route(b) = %q, want none", got)
	}
}

func TestCloseDoesNotWaitForAStuckCallback(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	_, err := f.s.Subscribe("x.v", func(sk.Delta) {
		entered <- struct{}{}
		<-release
	})
	must(t, err)
	c := f.connect()
	c.Next(t)
	c.Send(t, `{"updates":[{"values":[{"path":"x.v","value":1}]}]}`)
	<-entered
	closed := make(chan struct{})
	go func() { f.s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close waited for a stuck subscriber")
	}
}
