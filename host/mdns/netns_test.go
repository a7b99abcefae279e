package mdns

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"devhost/host/mdns/mdnstest"
	"devhost/host/testio"
)

// The tests in this file send real multicast, only ever inside a network namespace that
// mdnstest.Netns creates for them.

// netWait bounds a wait for what the responders and peers do on the namespace's network: long,
// since a loaded machine only makes them slower.
const netWait = 15 * time.Second

func realResponder(t *testing.T, host string) *Responder {
	t.Helper()
	return mdnstest.Responder(t, host, func(log *slog.Logger) (*Responder, error) {
		return New(Config{Hostname: host, Interfaces: []string{"lo"}, Logger: log})
	})
}

// wantResolved fails the test unless m, a zeroconf peer's "added" event, resolved the
// instance name on dev.local. port 8080 at 127.0.0.1 with the TXT record txt.
func wantResolved(t *testing.T, m map[string]any, name string, txt []string) {
	t.Helper()
	if m["name"] != name || m["server"] != "dev.local." || m["port"] != float64(8080) ||
		!reflect.DeepEqual(m["addresses"], []any{"127.0.0.1"}) {
		t.Fatalf("zeroconf resolved %v", m)
	}
	got := map[string]string{}
	for k, v := range m["txt"].(map[string]any) {
		got[k], _ = v.(string)
	}
	if !reflect.DeepEqual(got, ParseTXT(txt)) {
		t.Fatalf("zeroconf TXT of %s: %v, want %v", name, got, ParseTXT(txt))
	}
}

type browser struct {
	ch     chan Event
	cancel context.CancelFunc
	done   chan error
}

func browse(t *testing.T, r *Responder, service string) *browser {
	ctx, cancel := context.WithCancel(context.Background())
	b := &browser{ch: make(chan Event, 64), cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- r.Browse(ctx, service, func(e Event) { b.ch <- e }) }()
	t.Cleanup(func() {
		cancel()
		<-b.done
	})
	return b
}

func (b *browser) wait(t *testing.T, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(netWait)
	for {
		select {
		case e := <-b.ch:
			if match(e) {
				return e
			}
			t.Logf("while waiting for %s: %+v", what, e)
		case <-deadline:
			t.Fatalf("no event: %s", what)
		}
	}
}

func serviceNamed(r *Responder, typ string) ServiceStatus {
	for _, s := range r.Services() {
		if s.Type == typ {
			return s
		}
	}
	return ServiceStatus{}
}

// legacyQuery asks one question as a plain DNS client would (from an ephemeral port) and
// returns the unicast answer.
func legacyQuery(t *testing.T, name string, typ dnsmessage.Type) message {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := message{ID: 4242, Questions: []question{{Name: name, Type: typ}}}
	b, err := q.pack()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9000)
	for try := 0; try < 5; try++ {
		if _, err := c.WriteTo(b, groupAddr); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			m, err := parseMessage(buf[:n])
			if err == nil && m.ID == q.ID && m.Response && len(m.Answers) > 0 {
				return m
			}
		}
	}
	t.Fatalf("no answer to %s %v", name, typ)
	return message{}
}

var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

func devTXT(version string) []string {
	return []string{"v=" + version, "app=devhost", "dev=sim", "target=esp32s3", "id=1a2b", "api=/api/v1", "auth=0"}
}

func TestNetnsAdvertiseAndBrowse(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	dev := realResponder(t, "dev")
	for _, s := range []Service{
		{Type: "_http", Proto: "_tcp", Port: 8080, TXT: []string{"path=/"}},
		{Type: "_dev", Proto: "_tcp", Port: 8080, TXT: devTXT("1.0")},
	} {
		if err := dev.Register(s); err != nil {
			t.Fatal(err)
		}
	}
	viewer := realResponder(t, "viewer")
	b := browse(t, viewer, "_dev._tcp")

	e := b.wait(t, "dev added", func(e Event) bool { return e.Type == Added })
	want := Event{Type: Added, Instance: "dev", Service: "_dev._tcp", Host: "dev.local", Port: 8080, Addrs: loopback, TXT: ParseTXT(devTXT("1.0"))}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("added %+v\nwant %+v", e, want)
	}

	// The plumbing answers for the host name.
	a := legacyQuery(t, "dev.local.", dnsmessage.TypeA)
	if a.Answers[0].Type != dnsmessage.TypeA || a.Answers[0].Addr != loopback[0] {
		t.Fatalf("A answer %+v", a.Answers)
	}
	// And this package answers a legacy DNS-SD question.
	p := legacyQuery(t, "_http._tcp.local.", dnsmessage.TypePTR)
	if p.Answers[0].Target != "dev._http._tcp.local." || p.Answers[0].TTL > ttlLegacy {
		t.Fatalf("PTR answer %+v", p.Answers)
	}

	if err := dev.UpdateTXT("", "_dev", "_tcp", devTXT("1.1")); err != nil {
		t.Fatal(err)
	}
	b.wait(t, "TXT updated", func(e Event) bool { return e.Type == Updated && e.TXT["v"] == "1.1" })

	// A second registration of the same instance elsewhere is renamed after its probe is
	// answered.
	if err := viewer.Register(Service{Instance: "dev", Type: "_dev", Proto: "_tcp", Port: 9999}); err != nil {
		t.Fatal(err)
	}
	e = b.wait(t, "renamed instance added", func(e Event) bool { return e.Type == Added })
	if e.Instance != "dev (2)" || e.Port != 9999 || e.Host != "viewer.local" {
		t.Fatalf("renamed %+v", e)
	}
	if s := serviceNamed(viewer, "_dev"); s.Instance != "dev (2)" || s.Registered != "dev" {
		t.Fatalf("viewer's service %+v", s)
	}

	if err := dev.Unregister("", "_dev", "_tcp"); err != nil {
		t.Fatal(err)
	}
	e = b.wait(t, "dev removed", func(e Event) bool { return e.Type == Removed })
	if e.Instance != "dev" {
		t.Fatalf("removed %+v", e)
	}
	if err := viewer.Close(); err != nil {
		t.Fatal(err)
	}
	// A responder finds its own services too.
	b2 := browse(t, dev, "_http._tcp")
	b2.wait(t, "own _http service", func(e Event) bool { return e.Type == Added && e.Instance == "dev" })
}

func TestNetnsInteropZeroconf(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	python := mdnstest.Python(t)

	t.Run("zeroconf browses ours", func(t *testing.T) {
		pb := mdnstest.StartPeer(t, python, "browse", "_dev._tcp")
		pb.Wait("browsing", "")
		dev := realResponder(t, "dev")
		if err := dev.Register(Service{Type: "_dev", Proto: "_tcp", Port: 8080, TXT: devTXT("1.0")}); err != nil {
			t.Fatal(err)
		}
		wantResolved(t, pb.Wait("added", ""), "dev._dev._tcp.local.", devTXT("1.0"))
		if err := dev.Unregister("", "_dev", "_tcp"); err != nil {
			t.Fatal(err)
		}
		if m := pb.Wait("removed", ""); m["name"] != "dev._dev._tcp.local." {
			t.Fatalf("removed %v", m)
		}
		pb.Stop()
	})

	t.Run("ours browses zeroconf", func(t *testing.T) {
		viewer := realResponder(t, "viewer")
		b := browse(t, viewer, "_signalk-http._tcp")
		pr := mdnstest.StartPeer(t, python, "register", "_signalk-http._tcp", "boat", "3000", "pi", "127.0.0.1",
			"txtvers=1", "swname=signalk-server", "swvers=2.32.0", "roles=master, main", "self=urn:mrn:signalk:uuid:1")
		pr.Wait("registered", "")
		e := b.wait(t, "boat added", func(e Event) bool { return e.Type == Added })
		want := Event{Type: Added, Instance: "boat", Service: "_signalk-http._tcp", Host: "pi.local", Port: 3000, Addrs: loopback,
			TXT: map[string]string{"txtvers": "1", "swname": "signalk-server", "swvers": "2.32.0", "roles": "master, main", "self": "urn:mrn:signalk:uuid:1"}}
		if !reflect.DeepEqual(e, want) {
			t.Fatalf("added %+v\nwant %+v", e, want)
		}
		pr.Stop()
		pr.Wait("unregistered", "")
		b.wait(t, "boat removed by its goodbye", func(e Event) bool { return e.Type == Removed && e.Instance == "boat" })
	})

	t.Run("zeroconf defends its instance name", func(t *testing.T) {
		pr := mdnstest.StartPeer(t, python, "register", "_dev._tcp", "dev", "7000", "other", "127.0.0.1", "v=9")
		pr.Wait("registered", "")
		dev := realResponder(t, "dev")
		if err := dev.Register(Service{Type: "_dev", Proto: "_tcp", Port: 8080, TXT: devTXT("1.0")}); err != nil {
			t.Fatal(err)
		}
		testio.Eventually(t, netWait, func() bool {
			s := serviceNamed(dev, "_dev")
			return s.Instance == "dev (2)" && s.State == "announced"
		})
		b := browse(t, dev, "_dev._tcp")
		seen := map[string]int{}
		for len(seen) < 2 {
			e := b.wait(t, "both instances", func(e Event) bool { return e.Type == Added })
			seen[e.Instance] = e.Port
		}
		if !reflect.DeepEqual(seen, map[string]int{"dev": 7000, "dev (2)": 8080}) {
			t.Fatalf("instances %v", seen)
		}
		pr.Stop()
	})

	t.Run("host name taken by another address", func(t *testing.T) {
		dev := realResponder(t, "dev")
		testio.Eventually(t, netWait, func() bool { return dev.Hostname() == "dev" && dev.hostAnnounced() })
		pr := mdnstest.StartPeer(t, python, "register", "_ssh._tcp", "other", "22", "dev", "127.0.0.2")
		pr.Wait("registered", "")
		testio.Eventually(t, netWait, func() bool { return dev.Hostname() == "dev-2" && dev.hostAnnounced() })
		a := legacyQuery(t, "dev-2.local.", dnsmessage.TypeA)
		if a.Answers[0].Addr != loopback[0] {
			t.Fatalf("A answer for the new name %+v", a.Answers)
		}
		pr.Stop()
	})
}

// TestNetnsGoodbyeOnClose checks that Close sends goodbyes another host acts on.
func TestNetnsGoodbyeOnClose(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	dev := realResponder(t, "dev")
	if err := dev.RegisterApp(Service{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110}); err != nil {
		t.Fatal(err)
	}
	viewer := realResponder(t, "viewer")
	b := browse(t, viewer, "_nmea-0183._udp")
	b.wait(t, "added", func(e Event) bool { return e.Type == Added && e.Instance == "logger" && e.Port == 10110 })
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	// Only the goodbyes can remove it within netWait: without them the viewer would keep the
	// records for their TTL, ttlHost (120 s) and more. That is the measure of "long before the
	// TTL"; a reading of the clock here would add only a bet on the machine's speed.
	if netWait >= ttlHost*time.Second {
		t.Fatalf("netWait %v cannot tell a goodbye from an expiry", netWait)
	}
	b.wait(t, "removed", func(e Event) bool { return e.Type == Removed && e.Instance == "logger" })
}

func (r *Responder) hostAnnounced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.host.state == stateAnnounced
}
