package mdns

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/net/dns/dnsmessage"
)

// sent is one packet the responder put on the fake link.
type sent struct {
	m   message
	ifc int
	dst *net.UDPAddr
}

// fakeLink is a network with one interface (index 2, 10.0.0.1/24) that records what is sent.
type fakeLink struct {
	t      *testing.T
	out    chan sent
	once   sync.Once
	closed chan struct{}

	mu    sync.Mutex
	host  string
	hosts []string
}

func newFakeLink(t *testing.T) *fakeLink {
	return &fakeLink{t: t, out: make(chan sent, 256), closed: make(chan struct{})}
}

var testIface = iface{
	Index: 2, Name: "eth0", MTU: 1500,
	Addrs:  []netip.Prefix{netip.MustParsePrefix("10.0.0.1/24")},
	Addrs6: []netip.Addr{netip.MustParseAddr("fe80::1")},
}

func (l *fakeLink) Ifaces() []iface { return []iface{testIface} }

func (l *fakeLink) Send(b []byte, ifIndex int, dst *net.UDPAddr) {
	m, err := parseMessage(b)
	if err != nil {
		l.t.Errorf("responder sent an unreadable packet: %v", err)
		return
	}
	l.out <- sent{m: m, ifc: ifIndex, dst: dst}
}

func (l *fakeLink) Run(func([]byte, *net.UDPAddr, int)) { <-l.closed }
func (l *fakeLink) Close()                              { l.once.Do(func() { close(l.closed) }) }

func (l *fakeLink) StartHost(h string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.host = h
	l.hosts = append(l.hosts, h)
	return nil
}

func (l *fakeLink) StopHost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.host = ""
}

func (l *fakeLink) answering() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.host
}

type harness struct {
	t     *testing.T
	r     *Responder
	clock *clockwork.FakeClock
	link  *fakeLink
	opens int
}

func newHarness(t *testing.T, slots int) *harness {
	t.Helper()
	h := &harness{t: t, clock: clockwork.NewFakeClock(), link: newFakeLink(t)}
	r, err := New(Config{Hostname: "dev", Slots: slots, Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	r.rand = func(time.Duration) time.Duration { return 0 }
	r.open = func() (netLink, error) {
		h.opens++
		h.link = newFakeLink(t)
		return h.link, nil
	}
	h.r = r
	t.Cleanup(func() { _ = r.Close() })
	return h
}

// start starts the responder on the fake link, which cannot fail to open.
func (h *harness) start() {
	h.t.Helper()
	if err := h.r.Start(); err != nil {
		h.t.Fatal(err)
	}
}

// next waits for the next packet.
func (h *harness) next() sent {
	h.t.Helper()
	select {
	case s := <-h.link.out:
		return s
	case <-time.After(5 * time.Second):
		h.t.Fatal("no packet sent")
	}
	return sent{}
}

// probes checks that the next packets are one probe for each name, in any order.
func (h *harness) probes(what string, names ...string) {
	h.t.Helper()
	var got []string
	for range names {
		got = append(got, h.next().m.Questions[0].Name)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
		h.t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// quiet checks that nothing more is sent.
func (h *harness) quiet() {
	h.t.Helper()
	select {
	case s := <-h.link.out:
		h.t.Fatalf("unexpected packet %+v", s.m)
	case <-time.After(50 * time.Millisecond):
	}
}

// advance moves the clock once the given number of timers are waiting.
func (h *harness) advance(timers int, d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, timers); err != nil {
		st, step := h.hostState()
		h.t.Fatalf("waiting for %d timers: %v (host %v/%d, services %+v)", timers, err, st, step, h.r.Services())
	}
	h.clock.Advance(d)
}

// inject delivers a packet as if it arrived on the interface.
func (h *harness) inject(m message, src *net.UDPAddr) {
	h.t.Helper()
	b, err := m.pack()
	if err != nil {
		h.t.Fatal(err)
	}
	h.r.handle(h.link, b, src, testIface.Index)
}

var peer = &net.UDPAddr{IP: net.IPv4(10, 0, 0, 7), Port: mdnsPort}

// hostState reads the host entry's state and step under the responder's lock.
func (h *harness) hostState() (entryState, int) {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	return h.r.host.state, h.r.host.step
}

func (h *harness) state(instance string) string {
	for _, s := range h.r.Services() {
		if s.Registered == instance {
			return s.State
		}
	}
	return ""
}

// probeAndAnnounce takes a freshly started responder with only the host entry to
// announced, returning the packets it sent.
func (h *harness) probeAndAnnounce(entries int) []sent {
	h.t.Helper()
	var out []sent
	for i := 0; i < probeCount; i++ {
		for j := 0; j < entries; j++ {
			out = append(out, h.next())
		}
		h.advance(entries, probeWait)
	}
	for i := 0; i < announceCount; i++ {
		for j := 0; j < entries; j++ {
			out = append(out, h.next())
		}
		if i < announceCount-1 {
			h.advance(entries, announceGap)
		}
	}
	return out
}

func aRec(name, ip string, ttl uint32) record {
	return record{Name: name, Type: dnsmessage.TypeA, Flush: true, TTL: ttl, Addr: netip.MustParseAddr(ip)}
}

func aaaaRec(name, ip string, ttl uint32) record {
	return record{Name: name, Type: dnsmessage.TypeAAAA, Flush: true, TTL: ttl, Addr: netip.MustParseAddr(ip)}
}

func TestHostProbesThenAnnounces(t *testing.T) {
	h := newHarness(t, 0)
	h.start()
	start := h.clock.Now()
	for i := 0; i < probeCount; i++ {
		p := h.next()
		if p.m.Response || p.dst != nil || p.ifc != testIface.Index {
			t.Fatalf("probe %d: %+v", i, p)
		}
		wantQ := []question{{Name: "dev.local.", Type: dnsmessage.TypeALL}}
		if !slices.Equal(p.m.Questions, wantQ) {
			t.Fatalf("probe %d questions %+v", i, p.m.Questions)
		}
		if len(p.m.Authorities) != 1 || !sameData(p.m.Authorities[0], aRec("dev.local.", "10.0.0.1", 0)) {
			t.Fatalf("probe %d authorities %+v", i, p.m.Authorities)
		}
		if got := h.clock.Since(start); got != time.Duration(i)*probeWait {
			t.Fatalf("probe %d at %v", i, got)
		}
		if h.link.answering() != "" {
			t.Fatal("plumbing answers for the host before probing finished")
		}
		h.advance(1, probeWait)
	}
	for i := 0; i < announceCount; i++ {
		a := h.next()
		if got, want := h.clock.Since(start), 3*probeWait+time.Duration(i)*announceGap; got != want {
			t.Fatalf("announcement %d at %v, want %v", i, got, want)
		}
		want := []record{aRec("dev.local.", "10.0.0.1", ttlHost)}
		if !a.m.Response || !slices.EqualFunc(a.m.Answers, want, recEqual) {
			t.Fatalf("announcement %d: %+v", i, a.m)
		}
		if i == 0 {
			h.advance(1, announceGap)
		}
	}
	if got := h.link.answering(); got != "dev" {
		t.Fatalf("plumbing answers for %q, want dev", got)
	}
	h.quiet()
}

func recEqual(a, b record) bool {
	return sameData(a, b) && a.TTL == b.TTL && a.Flush == b.Flush
}

func TestServiceProbesAnnouncesAndAnswers(t *testing.T) {
	h := newHarness(t, 0)
	svc := Service{Type: "_http", Proto: "_tcp", Port: 8080, TXT: []string{"path=/"}}
	if err := h.r.Register(svc); err != nil {
		t.Fatal(err)
	}
	h.start()
	pkts := h.probeAndAnnounce(2)
	var probes, announcements []message
	for _, p := range pkts {
		if p.m.Response {
			announcements = append(announcements, p.m)
		} else {
			probes = append(probes, p.m)
		}
	}
	ptr := record{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: ttlOther, Target: "dev._http._tcp.local."}
	srv := record{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeSRV, Flush: true, TTL: ttlHost, Port: 8080, Target: "dev.local."}
	txt := record{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeTXT, Flush: true, TTL: ttlOther, Text: []string{"path=/"}}
	hostA := aRec("dev.local.", "10.0.0.1", ttlHost)
	svcProbes := 0
	for _, p := range probes {
		if p.Questions[0].Name == "dev._http._tcp.local." {
			svcProbes++
			if !slices.EqualFunc(p.Authorities, []record{srv, txt}, recEqual) {
				t.Fatalf("service probe proposes %+v", p.Authorities)
			}
		}
	}
	if svcProbes != probeCount {
		t.Fatalf("%d service probes, want %d", svcProbes, probeCount)
	}
	svcAnn := 0
	for _, a := range announcements {
		if len(a.Answers) == 3 {
			svcAnn++
			if !slices.EqualFunc(a.Answers, []record{ptr, srv, txt}, recEqual) {
				t.Fatalf("service announcement %+v", a.Answers)
			}
		}
	}
	if svcAnn == 0 {
		t.Fatal("service not announced")
	}
	// The host's announcement restarts the service's (its SRV names the host): let both settle.
	h.settle("")

	legacySrc := &net.UDPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 40000}
	offLink := &net.UDPAddr{IP: net.IPv4(192, 168, 1, 9), Port: 40000}
	cases := []struct {
		name   string
		q      message
		src    *net.UDPAddr
		want   []record // answers
		extra  []record // additionals
		dst    *net.UDPAddr
		silent bool
	}{
		{name: "PTR", q: message{Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR}}},
			src: peer, want: []record{ptr}, extra: []record{srv, txt, hostA}},
		{name: "PTR mixed case", q: message{Questions: []question{{Name: "_HTTP._Tcp.LOCAL.", Type: dnsmessage.TypePTR}}},
			src: peer, want: []record{ptr}, extra: []record{srv, txt, hostA}},
		{name: "SRV", q: message{Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeSRV}}},
			src: peer, want: []record{srv}, extra: []record{hostA}},
		{name: "TXT", q: message{Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeTXT}}},
			src: peer, want: []record{txt}},
		{name: "ANY instance", q: message{Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeALL}}},
			src: peer, want: []record{srv, txt}, extra: []record{hostA}},
		{name: "ANY host", q: message{Questions: []question{{Name: "dev.local.", Type: dnsmessage.TypeALL}}},
			src: peer, want: []record{hostA, aaaaRec("dev.local.", "fe80::1", ttlHost)}},
		{name: "AAAA host", q: message{Questions: []question{{Name: "dev.local.", Type: dnsmessage.TypeAAAA}}},
			src: peer, want: []record{aaaaRec("dev.local.", "fe80::1", ttlHost)}},
		{name: "A host is the plumbing's", q: message{Questions: []question{{Name: "dev.local.", Type: dnsmessage.TypeA}}},
			src: peer, silent: true},
		{name: "enumeration", q: message{Questions: []question{{Name: enumerationFQN, Type: dnsmessage.TypePTR}}},
			src: peer, want: []record{{Name: enumerationFQN, Type: dnsmessage.TypePTR, TTL: ttlOther, Target: "_http._tcp.local."}}},
		{name: "QU", q: message{Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, QU: true}}},
			src: peer, want: []record{ptr}, extra: []record{srv, txt, hostA}, dst: peer},
		{name: "known answer", q: message{Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR}},
			Answers: []record{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: ttlOther / 2, Target: "dev._http._tcp.local."}}},
			src: peer, silent: true},
		{name: "stale known answer", q: message{Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR}},
			Answers: []record{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: ttlOther/2 - 1, Target: "dev._http._tcp.local."}}},
			src: peer, want: []record{ptr}, extra: []record{srv, txt, hostA}},
		{name: "other service", q: message{Questions: []question{{Name: "_ipp._tcp.local.", Type: dnsmessage.TypePTR}}},
			src: peer, silent: true},
		{name: "legacy unicast", q: message{ID: 77, Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeSRV}}},
			src: legacySrc, dst: legacySrc,
			want:  []record{{Name: srv.Name, Type: srv.Type, TTL: ttlLegacy, Port: 8080, Target: "dev.local."}},
			extra: []record{{Name: "dev.local.", Type: dnsmessage.TypeA, TTL: ttlLegacy, Addr: hostA.Addr}}},
		{name: "off-link legacy", q: message{ID: 78, Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeSRV}}},
			src: offLink, silent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			h.inject(c.q, c.src)
			if c.silent {
				h.quiet()
				return
			}
			got := h.next()
			if !got.m.Response || !slices.EqualFunc(got.m.Answers, c.want, recEqual) || !slices.EqualFunc(got.m.Additionals, c.extra, recEqual) {
				t.Fatalf("answer %+v\nwant answers %+v additionals %+v", got.m, c.want, c.extra)
			}
			if (got.dst == nil) != (c.dst == nil) || c.dst != nil && !got.dst.IP.Equal(c.dst.IP) {
				t.Fatalf("sent to %v, want %v", got.dst, c.dst)
			}
			if c.src.Port != mdnsPort && (got.m.ID != c.q.ID || !slices.Equal(got.m.Questions, c.q.Questions)) {
				t.Fatalf("legacy answer does not echo ID and question: %+v", got.m)
			}
			h.quiet()
		})
	}
}

// announced brings a responder with one service to the announced state and drains packets.
func announced(t *testing.T, svc Service) *harness {
	t.Helper()
	h := newHarness(t, 0)
	if err := h.r.Register(svc); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.settle(svc.Instance)
	return h
}

// settle runs the clock until the host and the service are announced, dropping the packets.
func (h *harness) settle(instance string) {
	h.t.Helper()
	for i := 0; i < 40; i++ {
		drain(h)
		if st, _ := h.hostState(); st == stateAnnounced && h.state(instance) == "announced" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		if h.clock.BlockUntilContext(ctx, 1) == nil {
			h.clock.Advance(announceGap)
		}
		cancel()
	}
	h.t.Fatalf("not announced: %+v", h.r.Services())
}

func drain(h *harness) {
	time.Sleep(20 * time.Millisecond)
	for {
		select {
		case <-h.link.out:
		default:
			return
		}
	}
}

var webSvc = Service{Instance: "web", Type: "_http", Proto: "_tcp", Port: 80, TXT: []string{"path=/"}}

func foreignSRV(name string) record {
	return record{Name: name, Type: dnsmessage.TypeSRV, Flush: true, TTL: 120, Port: 9999, Target: "other.local."}
}

func TestProbeConflictRenames(t *testing.T) {
	t.Run("service", func(t *testing.T) {
		h := newHarness(t, 0)
		if err := h.r.Register(webSvc); err != nil {
			t.Fatal(err)
		}
		h.start()
		h.next()
		h.next()
		h.inject(message{Response: true, Answers: []record{foreignSRV("web._http._tcp.local.")}}, peer)
		if got := h.r.Services()[0].Instance; got != "web (2)" {
			t.Fatalf("instance %q after conflict, want web (2)", got)
		}
		// The renamed instance probes from the start.
		for {
			p := h.next()
			if !p.m.Response && p.m.Questions[0].Name == "web (2)._http._tcp.local." {
				break
			}
		}
		if h.state("web") != "probing" || h.r.Hostname() != "dev" {
			t.Fatalf("state %s host %s", h.state("web"), h.r.Hostname())
		}
	})
	t.Run("host", func(t *testing.T) {
		h := newHarness(t, 0)
		h.start()
		h.next()
		h.inject(message{Response: true, Answers: []record{aRec("DEV.local.", "10.0.0.99", 120)}}, peer)
		if got := h.r.Hostname(); got != "dev-2" {
			t.Fatalf("hostname %q, want dev-2", got)
		}
		h.inject(message{Response: true, Answers: []record{aRec("dev-2.local.", "10.0.0.99", 120)}}, peer)
		if got := h.r.Hostname(); got != "dev-3" {
			t.Fatalf("hostname %q, want dev-3", got)
		}
		pkts := h.probeAndAnnounce(1)
		if q := pkts[len(pkts)-3].m.Questions; len(q) != 1 || q[0].Name != "dev-3.local." {
			t.Fatalf("last probe %+v", q)
		}
		if got := h.link.answering(); got != "dev-3" {
			t.Fatalf("plumbing answers for %q", got)
		}
	})
	t.Run("own records and goodbyes are no conflict", func(t *testing.T) {
		h := newHarness(t, 0)
		h.start()
		h.next()
		h.inject(message{Response: true, Answers: []record{aRec("dev.local.", "10.0.0.1", 120)}}, peer)
		h.inject(message{Response: true, Answers: []record{aRec("dev.local.", "10.0.0.99", 0)}}, peer)
		h.inject(message{Response: true, Answers: []record{{Name: "dev.local.", Type: dnsmessage.TypeAAAA, TTL: 120, Addr: testIface.Addrs6[0]}}}, peer)
		// A response from a port other than 5353 is not an mDNS response.
		h.inject(message{Response: true, Answers: []record{aRec("dev.local.", "10.0.0.99", 120)}}, &net.UDPAddr{IP: peer.IP, Port: 1234})
		if got := h.r.Hostname(); got != "dev" {
			t.Fatalf("hostname %q, want dev", got)
		}
	})
}

func TestConflictAfterAnnouncingProbesAgain(t *testing.T) {
	h := announced(t, webSvc)
	// Another host's identical PTR (shared record) and a different TXT under another name are
	// not conflicts.
	h.inject(message{Response: true, Answers: []record{
		{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: 4500, Target: "web._http._tcp.local."},
		{Name: "other._http._tcp.local.", Type: dnsmessage.TypeTXT, TTL: 4500, Text: []string{"x=1"}},
	}}, peer)
	if h.state("web") != "announced" {
		t.Fatalf("state %s", h.state("web"))
	}
	h.inject(message{Response: true, Answers: []record{foreignSRV("web._http._tcp.local.")}}, peer)
	if h.state("web") != "probing" || h.r.Services()[0].Instance != "web" {
		t.Fatalf("after a conflicting SRV: %+v", h.r.Services())
	}
	p := h.next()
	if p.m.Response || p.m.Questions[0].Name != "web._http._tcp.local." {
		t.Fatalf("expected a probe for the same name, got %+v", p.m)
	}
	// The other owner defends the name: now it is renamed.
	h.inject(message{Response: true, Answers: []record{foreignSRV("web._http._tcp.local.")}}, peer)
	if got := h.r.Services()[0].Instance; got != "web (2)" {
		t.Fatalf("instance %q, want web (2)", got)
	}
	// A conflicting A record for the announced host sends the host back to probing and stops
	// the plumbing answering for it.
	h.inject(message{Response: true, Answers: []record{aRec("dev.local.", "10.0.0.99", 120)}}, peer)
	if st, _ := h.hostState(); st != stateProbing || h.link.answering() != "" || h.r.Hostname() != "dev" {
		t.Fatalf("host state %v answering %q name %s", st, h.link.answering(), h.r.Hostname())
	}
}

func TestProbeTieBreak(t *testing.T) {
	probeFrom := func(ip string) message {
		return message{
			Questions:   []question{{Name: "dev.local.", Type: dnsmessage.TypeALL}},
			Authorities: []record{aRec("dev.local.", ip, 120)},
		}
	}
	t.Run("we win", func(t *testing.T) {
		h := newHarness(t, 0)
		h.start()
		h.next()
		h.inject(probeFrom("10.0.0.0"), peer)
		h.inject(probeFrom("10.0.0.1"), peer) // our own probe looped back
		h.advance(1, probeWait)
		h.next()
		if st, step := h.hostState(); step != 2 || st != stateProbing {
			t.Fatalf("step %d state %v, want the second probe sent", step, st)
		}
	})
	t.Run("we lose and wait a second", func(t *testing.T) {
		h := newHarness(t, 0)
		h.start()
		h.next()
		h.inject(probeFrom("10.0.0.200"), peer)
		h.advance(1, probeWait)
		h.quiet()
		h.advance(1, lostTieWait-probeWait)
		p := h.next()
		if _, step := h.hostState(); p.m.Response || step != 1 || h.r.Hostname() != "dev" {
			t.Fatalf("after losing: %+v step %d", p.m, step)
		}
	})
}

func TestConflictStormSlowsProbing(t *testing.T) {
	h := newHarness(t, 0)
	h.start()
	h.next()
	for i := 0; i < conflictLimit; i++ {
		h.inject(message{Response: true, Answers: []record{aRec(h.r.Hostname()+".local.", "10.0.0.99", 120)}}, peer)
	}
	drain(h)
	h.advance(1, conflictPause-time.Millisecond)
	h.quiet()
	h.advance(1, time.Millisecond)
	if p := h.next(); p.m.Questions[0].Name != "dev-16.local." {
		t.Fatalf("probe %+v", p.m.Questions)
	}
}

func TestGoodbyes(t *testing.T) {
	h := announced(t, webSvc)
	if err := h.r.Unregister("WEB", "_http", "_tcp"); err != nil {
		t.Fatal(err)
	}
	g := h.next()
	want := []record{
		{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: 0, Target: "web._http._tcp.local."},
		{Name: "web._http._tcp.local.", Type: dnsmessage.TypeSRV, Flush: true, TTL: 0, Port: 80, Target: "dev.local."},
		{Name: "web._http._tcp.local.", Type: dnsmessage.TypeTXT, Flush: true, TTL: 0, Text: []string{"path=/"}},
	}
	if !g.m.Response || !slices.EqualFunc(g.m.Answers, want, recEqual) {
		t.Fatalf("goodbye %+v", g.m)
	}
	if err := h.r.Unregister("web", "_http", "_tcp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second unregister: %v", err)
	}
	// An unregistered service is not answered for.
	h.inject(message{Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR}}}, peer)
	h.quiet()

	if err := h.r.Register(Service{Instance: "ftp", Type: "_ftp", Proto: "_tcp", Port: 21}); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
	// The probing service gets no goodbye; the host does.
	for g = h.next(); !g.m.Response; g = h.next() {
		if g.m.Questions[0].Name != "ftp._ftp._tcp.local." {
			t.Fatalf("unexpected query %+v", g.m)
		}
	}
	if !slices.EqualFunc(g.m.Answers, []record{aRec("dev.local.", "10.0.0.1", 0), aaaaRec("dev.local.", "fe80::1", 0)}, recEqual) {
		t.Fatalf("host goodbye %+v", g.m)
	}
	for {
		select {
		case s := <-h.link.out:
			if !s.m.Response && s.m.Questions[0].Name == "ftp._ftp._tcp.local." {
				continue // a probe sent before Close
			}
			t.Fatalf("unexpected packet after close %+v", s.m)
		case <-time.After(50 * time.Millisecond):
		}
		break
	}
	if err := h.r.Register(webSvc); !errors.Is(err, ErrClosed) {
		t.Fatalf("register after close: %v", err)
	}
}

func TestUpdateTXTAnnounces(t *testing.T) {
	h := announced(t, webSvc)
	if err := h.r.UpdateTXT("web", "_http", "_tcp", []string{"path=/"}); err != nil {
		t.Fatal(err)
	}
	h.quiet() // unchanged: nothing to announce
	if err := h.r.UpdateTXT("web", "_http", "_tcp", []string{"path=/x", "v=2"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < announceCount; i++ {
		a := h.next()
		txt := a.m.Answers[2]
		if txt.Type != dnsmessage.TypeTXT || !slices.Equal(txt.Text, []string{"path=/x", "v=2"}) || !txt.Flush {
			t.Fatalf("announcement %d: %+v", i, a.m.Answers)
		}
		if i == 0 {
			h.advance(1, announceGap)
		}
	}
	// Our previous TXT still in flight is not a conflict.
	h.inject(message{Response: true, Answers: []record{{Name: "web._http._tcp.local.", Type: dnsmessage.TypeTXT, Flush: true, TTL: 4500, Text: []string{"path=/"}}}}, peer)
	if h.state("web") != "announced" {
		t.Fatalf("state %s", h.state("web"))
	}
	for name, txt := range map[string][]string{"too many": {"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "dup": {"a=1", "a=2"}} {
		if err := h.r.UpdateTXT("web", "_http", "_tcp", txt); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := h.r.UpdateTXT("nope", "_http", "_tcp", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown service: %v", err)
	}
}

func TestRegistrationSlots(t *testing.T) {
	h := newHarness(t, 0)
	for i := 0; i < DefaultSlots; i++ {
		if err := h.r.RegisterApp(Service{Instance: "app", Type: "_a" + string(rune('a'+i)), Proto: "_udp", Port: 1000 + i}); err != nil {
			t.Fatal(err)
		}
	}
	extra := Service{Instance: "app", Type: "_zz", Proto: "_udp", Port: 999}
	if err := h.r.RegisterApp(extra); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("seventh app service: %v", err)
	}
	if err := h.r.Register(Service{Type: "_http", Proto: "_tcp", Port: 80}); err != nil {
		t.Fatalf("device service with full app slots: %v", err)
	}
	if err := h.r.Register(Service{Instance: "DEV", Type: "_http", Proto: "_tcp", Port: 81}); !errors.Is(err, ErrExists) {
		t.Fatalf("same instance again: %v", err)
	}
	if err := h.r.Unregister("app", "_aa", "_udp"); err != nil {
		t.Fatal(err)
	}
	if err := h.r.RegisterApp(extra); err != nil {
		t.Fatalf("after freeing a slot: %v", err)
	}
	if err := h.r.RegisterApp(Service{Type: "_x", Proto: "_tcp", Port: 1, TXT: []string{"=bad"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid service: %v", err)
	}
	for _, n := range []int{-1, 17} {
		if _, err := New(Config{Hostname: "dev", Slots: n}); !errors.Is(err, ErrInvalid) {
			t.Errorf("slots %d: %v", n, err)
		}
	}
	if r, err := New(Config{Hostname: "dev", Slots: 16}); err != nil || r.cfg.Slots != 16 {
		t.Errorf("16 slots: %v", err)
	}
	if _, err := New(Config{Hostname: "bad_name"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad hostname: %v", err)
	}
	apps := 0
	for _, s := range h.r.Services() {
		if s.App {
			apps++
			if s.State != "idle" {
				t.Errorf("%s state %s before start", s.Type, s.State)
			}
		}
	}
	if apps != DefaultSlots {
		t.Fatalf("%d app services listed", apps)
	}
}

func TestSetHostnameAndNetworkChanges(t *testing.T) {
	h := announced(t, webSvc)
	if err := h.r.SetHostname("boat"); err != nil {
		t.Fatal(err)
	}
	g := h.next()
	if !slices.EqualFunc(g.m.Answers, []record{aRec("dev.local.", "10.0.0.1", 0), aaaaRec("dev.local.", "fe80::1", 0)}, recEqual) {
		t.Fatalf("goodbye for the old name: %+v", g.m)
	}
	if h.link.answering() != "" {
		t.Fatal("plumbing still answers for the old name")
	}
	for i := 0; i < probeCount; i++ {
		if p := h.next(); p.m.Questions[0].Name != "boat.local." {
			t.Fatalf("probe %+v", p.m)
		}
		h.advance(1, probeWait)
	}
	// The host's first announcement is followed by the service's, whose SRV now names it.
	if a := h.next(); a.m.Answers[0].Name != "boat.local." {
		t.Fatalf("host announcement %+v", a.m)
	}
	a := h.next()
	if a.m.Answers[1].Type != dnsmessage.TypeSRV || a.m.Answers[1].Target != "boat.local." {
		t.Fatalf("service announcement %+v", a.m)
	}
	if h.link.answering() != "boat" {
		t.Fatalf("plumbing answers for %q", h.link.answering())
	}

	old := h.link
	h.r.NetworkDown()
	if h.state("web") != "idle" {
		t.Fatalf("state after network down: %s", h.state("web"))
	}
	select {
	case <-old.closed:
	default:
		t.Fatal("link not closed at network down")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := h.r.WaitReady(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady while down: %v", err)
	}
	if err := h.r.NetworkChanged(); err != nil {
		t.Fatal(err)
	}
	if err := h.r.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.opens != 2 {
		t.Fatalf("%d opens", h.opens)
	}
	// Everything probes again on the new link.
	h.probes("probes after the change", "boat.local.", "web._http._tcp.local.")
}

func TestStartWithoutInterface(t *testing.T) {
	h := newHarness(t, 0)
	h.r.open = func() (netLink, error) { return nil, ErrNoInterface }
	if err := h.r.Start(); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("start: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- h.r.WaitReady(context.Background()) }()
	h.r.open = func() (netLink, error) { h.link = newFakeLink(t); return h.link, nil }
	if err := h.r.NetworkChanged(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

func TestSplitsLargeAnswers(t *testing.T) {
	h := newHarness(t, 0)
	h.r.open = func() (netLink, error) { h.link = newFakeLink(t); return h.link, nil }
	r := h.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.link = newFakeLink(t)
	h.link = r.link.(*fakeLink)
	var answers []record
	for i := 0; i < 8; i++ {
		answers = append(answers, record{Name: "x._http._tcp.local.", Type: dnsmessage.TypeTXT, TTL: 1, Text: []string{string(make([]byte, 250)), string(rune('a' + i))}})
	}
	small := testIface
	small.MTU = 600
	r.sendRecords(small, message{Response: true}, answers, nil, nil)
	total := 0
	for total < len(answers) {
		s := h.next()
		total += len(s.m.Answers)
		b, _ := s.m.pack()
		if len(b) > small.payloadLimit() {
			t.Fatalf("packet of %d bytes over the %d limit", len(b), small.payloadLimit())
		}
	}
}

func TestQUAnsweredByMulticastWhenStale(t *testing.T) {
	h := announced(t, webSvc)
	qu := message{Questions: []question{{Name: "web._http._tcp.local.", Type: dnsmessage.TypeSRV, QU: true}}}
	h.inject(qu, peer)
	if s := h.next(); s.dst == nil {
		t.Fatal("QU right after the announcement went out by multicast")
	}
	// A quarter of the SRV's TTL later the answer is multicast, which refreshes every cache.
	h.clock.Advance(ttlHost*time.Second/4 + time.Second)
	h.inject(qu, peer)
	if s := h.next(); s.dst != nil || s.m.Answers[0].Type != dnsmessage.TypeSRV {
		t.Fatalf("stale QU answered to %v: %+v", s.dst, s.m)
	}
	h.inject(qu, peer)
	if s := h.next(); s.dst == nil {
		t.Fatal("QU right after a multicast answer went out by multicast")
	}
}

// TestSetHostnameMovesHostnameServices: a service registered without an instance name says
// goodbye under the old host name and probes under the new one.
func TestSetHostnameMovesHostnameServices(t *testing.T) {
	h := announced(t, Service{Type: "_dev", Proto: "_tcp", Port: 80, TXT: []string{"v=1"}})
	if err := h.r.SetHostname("boat"); err != nil {
		t.Fatal(err)
	}
	if g := h.next(); !slices.EqualFunc(g.m.Answers, []record{aRec("dev.local.", "10.0.0.1", 0), aaaaRec("dev.local.", "fe80::1", 0)}, recEqual) {
		t.Fatalf("host goodbye %+v", g.m)
	}
	g := h.next()
	if len(g.m.Answers) == 0 || g.m.Answers[0].Type != dnsmessage.TypePTR ||
		g.m.Answers[0].Target != "dev._dev._tcp.local." || g.m.Answers[0].TTL != 0 {
		t.Fatalf("service goodbye %+v", g.m)
	}
	h.probes("first probes after the rename", "boat.local.", "boat._dev._tcp.local.")
	h.settle("")
	if s := h.r.Services(); len(s) != 1 || s[0].Instance != "boat" || s[0].Registered != "" {
		t.Fatalf("services after the rename %+v", s)
	}
}

// A rename while the names are probed again after a network change still says goodbye to the
// records other hosts hold from before the change.
func TestSetHostnameWhileReprobing(t *testing.T) {
	h := announced(t, Service{Type: "_dev", Proto: "_tcp", Port: 80})
	if err := h.r.NetworkChanged(); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.hostState(); st != stateProbing {
		t.Fatalf("host %v after the network change", st)
	}
	drain(h)
	if err := h.r.SetHostname("boat"); err != nil {
		t.Fatal(err)
	}
	var goodbyes []string
	for len(goodbyes) < 2 {
		p := h.next()
		if p.m.Response && len(p.m.Answers) > 0 && p.m.Answers[0].TTL == 0 {
			goodbyes = append(goodbyes, p.m.Answers[0].Name)
		}
	}
	if !slices.Equal(goodbyes, []string{"dev.local.", "_dev._tcp.local."}) {
		t.Fatalf("goodbyes for %v", goodbyes)
	}
}
