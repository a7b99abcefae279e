package skdiscovery

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/mdns"
)

// fakeBrowser answers each Browse with the events scripted for the service, then waits for
// the pass to end.
type fakeBrowser struct {
	ready chan struct{}
	calls chan string

	mu     sync.Mutex
	script map[string][]mdns.Event
}

func newFakeBrowser() *fakeBrowser {
	b := &fakeBrowser{ready: make(chan struct{}), calls: make(chan string, 16), script: map[string][]mdns.Event{}}
	close(b.ready)
	return b
}

func (b *fakeBrowser) set(service string, evs ...mdns.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.script[service] = evs
}

func (b *fakeBrowser) WaitReady(ctx context.Context) error {
	select {
	case <-b.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *fakeBrowser) Browse(ctx context.Context, service string, fn func(mdns.Event)) error {
	b.mu.Lock()
	evs := slices.Clone(b.script[service])
	b.mu.Unlock()
	for _, e := range evs {
		fn(e)
	}
	b.calls <- service
	<-ctx.Done()
	return nil
}

type rig struct {
	t        *testing.T
	d        *Discoverer
	b        *fakeBrowser
	clock    *clockwork.FakeClock
	link     atomic.Bool
	interval atomic.Int64
	passes   chan []Server
	cancel   context.CancelFunc
	done     chan error
}

const interval = 60 * time.Second

func newRig(t *testing.T, b *fakeBrowser) *rig {
	t.Helper()
	r := &rig{t: t, b: b, clock: clockwork.NewFakeClockAt(time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)), passes: make(chan []Server, 16), done: make(chan error, 1)}
	r.link.Store(true)
	r.interval.Store(int64(interval))
	d, err := New(Config{
		Browser:  b,
		Interval: func() time.Duration { return time.Duration(r.interval.Load()) },
		LinkUp:   r.link.Load,
		Clock:    r.clock,
		OnChange: func(s []Server) { r.passes <- s },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// listen completes a running pass: both browses started, then the window passes.
func (r *rig) listen() []Server {
	r.t.Helper()
	for i := 0; i < 2; i++ {
		select {
		case <-r.b.calls:
		case <-time.After(hangGuard):
			r.t.Fatal("pass did not browse both service types")
		}
	}
	r.waitTimers(1)
	r.clock.Advance(DefaultWindow)
	select {
	case s := <-r.passes:
		return s
	case <-time.After(hangGuard):
		r.t.Fatal("pass did not report")
	}
	return nil
}

func (r *rig) waitTimers(n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, n); err != nil {
		r.t.Fatalf("waiting for %d timers: %v", n, err)
	}
}

// next runs the following periodic pass.
func (r *rig) next() []Server {
	r.t.Helper()
	r.waitTimers(1)
	r.clock.Advance(time.Duration(r.interval.Load()))
	return r.listen()
}

func (r *rig) noPass() {
	r.t.Helper()
	select {
	case c := <-r.b.calls:
		r.t.Fatalf("unexpected browse of %s", c)
	case s := <-r.passes:
		r.t.Fatalf("unexpected pass %v", s)
	case <-time.After(50 * time.Millisecond):
	}
}

func skEvent(t mdns.EventType, instance, host string, port int, self string, roles string) mdns.Event {
	return mdns.Event{Type: t, Instance: instance, Host: host, Port: port,
		Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")},
		TXT:   map[string]string{"self": self, "roles": roles, "swname": "signalk-server", "swvers": "2.32.0", "txtvers": "1"}}
}

func instances(ss []Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Scheme+":"+s.Instance)
	}
	slices.Sort(out)
	return out
}

func TestPassCollectsBothServiceTypes(t *testing.T) {
	b := newFakeBrowser()
	b.set(ServiceHTTP, skEvent(mdns.Added, "boat", "pi.local", 3000, "urn:mrn:signalk:uuid:b", "master, main"))
	b.set(ServiceHTTPS,
		skEvent(mdns.Added, "boat", "pi.local", 3443, "urn:mrn:signalk:uuid:b", "master, main"),
		skEvent(mdns.Added, "aux", "aux.local", 80, "urn:mrn:signalk:uuid:a", "slave"),
		skEvent(mdns.Updated, "aux", "aux.local", 8080, "urn:mrn:signalk:uuid:a", "slave"))
	r := newRig(t, b)
	got := r.listen()
	if len(got) != 3 {
		t.Fatalf("%d servers: %v", len(got), got)
	}
	aux, boatHTTP, boatHTTPS := got[0], got[1], got[2]
	if aux.Scheme != "https" || aux.Port != 8080 || aux.Self != "urn:mrn:signalk:uuid:a" || aux.HasRole("master") {
		t.Fatalf("aux %+v", aux)
	}
	if boatHTTP.Scheme != "http" || boatHTTP.Port != 3000 || boatHTTPS.Scheme != "https" || boatHTTPS.Port != 3443 {
		t.Fatalf("boat %+v / %+v", boatHTTP, boatHTTPS)
	}
	if !boatHTTP.HasRole("MASTER") || !slices.Equal(boatHTTP.Roles, []string{"master", "main"}) ||
		boatHTTP.SWName != "signalk-server" || boatHTTP.SWVers != "2.32.0" || boatHTTP.TXT["txtvers"] != "1" {
		t.Fatalf("boat TXT %+v", boatHTTP)
	}
	if boatHTTP.Dial() != "10.0.0.5:3000" || boatHTTP.HostPort() != "pi.local:3000" {
		t.Fatalf("dial %s hostport %s", boatHTTP.Dial(), boatHTTP.HostPort())
	}
	if !boatHTTP.FirstSeen.Equal(r.clock.Now().Add(-DefaultWindow)) || !boatHTTP.LastSeen.Equal(boatHTTP.FirstSeen) {
		t.Fatalf("seen %v %v", boatHTTP.FirstSeen, boatHTTP.LastSeen)
	}

	if want := []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")}; aux.Host != "aux.local" ||
		aux.Instance != "aux" || !slices.Equal(aux.Roles, []string{"slave"}) || !slices.Equal(aux.Addrs, want) {
		t.Fatalf("aux %+v", aux)
	}
	// Later passes keep FirstSeen and move LastSeen.
	got = r.next()
	if !got[1].FirstSeen.Equal(boatHTTP.FirstSeen) || !got[1].LastSeen.After(boatHTTP.LastSeen) {
		t.Fatalf("second pass seen %v %v", got[1].FirstSeen, got[1].LastSeen)
	}
}

func TestMissingEntrySurvivesTwoIntervals(t *testing.T) {
	b := newFakeBrowser()
	boat := skEvent(mdns.Added, "boat", "pi.local", 3000, "urn:b", "master")
	aux := skEvent(mdns.Added, "aux", "aux.local", 3000, "urn:a", "")
	b.set(ServiceHTTP, boat, aux)
	r := newRig(t, b)
	if got := instances(r.listen()); !slices.Equal(got, []string{"http:aux", "http:boat"}) {
		t.Fatalf("pass 1: %v", got)
	}
	b.set(ServiceHTTP, aux)
	steps := []struct {
		name string
		want []string
	}{
		{"first miss", []string{"http:aux", "http:boat"}},
		{"second miss", []string{"http:aux", "http:boat"}},
		{"third miss drops it", []string{"http:aux"}},
	}
	for _, s := range steps {
		if got := instances(r.next()); !slices.Equal(got, s.want) {
			t.Fatalf("%s: %v, want %v", s.name, got, s.want)
		}
	}
	// A sighting resets the count.
	b.set(ServiceHTTP, boat)
	r.next()
	b.set(ServiceHTTP)
	r.next()
	r.next()
	b.set(ServiceHTTP, boat)
	r.next()
	b.set(ServiceHTTP)
	r.next()
	if got := instances(r.next()); !slices.Equal(got, []string{"http:boat"}) {
		t.Fatalf("after a sighting between misses: %v", got)
	}
}

func TestGoodbyeDropsAtOnce(t *testing.T) {
	b := newFakeBrowser()
	boat := skEvent(mdns.Added, "boat", "pi.local", 3000, "urn:b", "master")
	b.set(ServiceHTTP, boat)
	r := newRig(t, b)
	r.listen()
	gone := boat
	gone.Type = mdns.Removed
	b.set(ServiceHTTP, boat, gone)
	if got := r.next(); len(got) != 0 {
		t.Fatalf("after goodbye: %v", got)
	}
}

func TestTwelveServerCap(t *testing.T) {
	b := newFakeBrowser()
	evs := func(from, to int) []mdns.Event {
		var out []mdns.Event
		for i := from; i < to; i++ {
			out = append(out, skEvent(mdns.Added, fmt.Sprintf("s%02d", i), fmt.Sprintf("h%02d.local", i), 3000, fmt.Sprintf("urn:%02d", i), ""))
		}
		return out
	}
	b.set(ServiceHTTP, evs(0, 14)...)
	r := newRig(t, b)
	got := r.listen()
	if len(got) != MaxServers || got[0].Instance != "s00" || got[11].Instance != "s11" {
		t.Fatalf("first pass kept %v", instances(got))
	}
	// Everyone still there: the newcomers stay out.
	b.set(ServiceHTTP, evs(0, 14)...)
	if got := r.next(); len(got) != MaxServers || slices.Contains(instances(got), "http:s12") {
		t.Fatalf("full list took a newcomer: %v", instances(got))
	}
	// s00 and s01 vanish: s12 and s13 take their places.
	b.set(ServiceHTTP, evs(2, 14)...)
	got = r.next()
	want := instances(serversFor(evs(2, 14)))
	if !slices.Equal(instances(got), want) {
		t.Fatalf("after two vanished: %v\nwant %v", instances(got), want)
	}
}

func serversFor(evs []mdns.Event) []Server {
	var out []Server
	for _, e := range evs {
		out = append(out, Server{Scheme: "http", Instance: e.Instance})
	}
	return out
}

func TestNoLinkPassReturnsNothing(t *testing.T) {
	b := newFakeBrowser()
	b.set(ServiceHTTP, skEvent(mdns.Added, "boat", "pi.local", 3000, "urn:b", "master"))
	r := newRig(t, b)
	r.listen()
	r.link.Store(false)
	b.set(ServiceHTTP)
	for i := 0; i < 4; i++ {
		r.waitTimers(1)
		r.clock.Advance(interval)
		r.noPass()
	}
	if got := r.d.Servers(); len(got) != 1 {
		t.Fatalf("passes without a link aged the list: %v", got)
	}
	r.link.Store(true)
	r.d.NetworkUp()
	if got := r.listen(); len(got) != 1 {
		t.Fatalf("first miss after link up dropped the entry: %v", got)
	}
}

func TestPassWaitsForResponder(t *testing.T) {
	b := newFakeBrowser()
	b.ready = make(chan struct{})
	b.set(ServiceHTTP, skEvent(mdns.Added, "boat", "pi.local", 3000, "urn:b", "master"))
	r := newRig(t, b)
	r.noPass()
	close(b.ready)
	if got := r.listen(); len(got) != 1 {
		t.Fatalf("pass after the responder came up: %v", got)
	}
}

func TestNetworkUpAndIntervalChanges(t *testing.T) {
	b := newFakeBrowser()
	r := newRig(t, b)
	r.listen()
	// A new sk.discover_s applies from the next wait; network-up runs a pass at once.
	r.waitTimers(1)
	r.interval.Store(int64(10 * time.Second))
	r.d.NetworkUp()
	r.listen()
	r.waitTimers(1)
	r.clock.Advance(10*time.Second - time.Millisecond)
	r.noPass()
	r.clock.Advance(time.Millisecond)
	r.listen()
	// Zero disables the periodic passes.
	r.waitTimers(1)
	r.interval.Store(0)
	r.clock.Advance(10 * time.Second)
	r.listen()
	r.clock.Advance(time.Hour)
	r.noPass()
	r.d.NetworkUp()
	r.listen()
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("empty config accepted")
	}
}

// hangGuard bounds the waits of these tests. Each waits on a condition; the bound only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute
