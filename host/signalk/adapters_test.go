package signalk

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/mdns"
	"devhost/host/skdiscovery"
)

// oneShotBrowser answers each browse with its scripted advertisements at once.
type oneShotBrowser map[string][]mdns.Event

func (oneShotBrowser) WaitReady(context.Context) error { return nil }

func (b oneShotBrowser) Browse(_ context.Context, service string, fn func(mdns.Event)) error {
	for _, e := range b[service] {
		fn(e)
	}
	return nil
}

// The adapter lists what the discoverer found with the address to dial as the host (IPv4
// first, then IPv6, then the advertised name when no address came), drops an entry without a
// usable port, and signals each pass without blocking.
func TestDiscoveryAdapterServers(t *testing.T) {
	a := NewDiscoveryAdapter()
	if got := a.Servers(); got != nil {
		t.Fatalf("no discoverer yet: %v", got)
	}
	txt := func(self string) map[string]string {
		return map[string]string{"self": self, "roles": "master, main", "swname": "signalk-server", "swvers": "2.32.0"}
	}
	v4, v6 := netip.MustParseAddr("192.168.1.20"), netip.MustParseAddr("fd00::20")
	b := oneShotBrowser{
		skdiscovery.ServiceHTTP: {
			{Type: mdns.Added, Instance: "both", Host: "boat.local", Port: 3000, Addrs: []netip.Addr{v6, v4}, TXT: txt("urn:a")},
			{Type: mdns.Added, Instance: "six", Host: "six.local", Port: 3001, Addrs: []netip.Addr{v6}, TXT: txt("urn:b")},
			{Type: mdns.Added, Instance: "name", Host: "name.local", Port: 3002, TXT: txt("urn:c")},
			{Type: mdns.Added, Instance: "noport", Host: "noport.local", Port: 0, Addrs: []netip.Addr{v4}, TXT: txt("urn:d")},
		},
		skdiscovery.ServiceHTTPS: {
			{Type: mdns.Added, Instance: "tls", Host: "tls.local", Port: 3443, Addrs: []netip.Addr{v4}, TXT: txt("urn:e")},
		},
	}
	clk := clockwork.NewFakeClockAt(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	d, err := skdiscovery.New(skdiscovery.Config{Browser: b, Clock: clk, LinkUp: func() bool { return true },
		Interval: func() time.Duration { return 0 }, OnChange: a.Notify})
	if err != nil {
		t.Fatal(err)
	}
	a.D = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-a.Changed():
	case <-time.After(hangGuard):
		t.Fatal("no signal after the pass")
	}
	// Notify never blocks, and signals collapse into one.
	a.Notify(nil)
	a.Notify(nil)
	<-a.Changed()
	select {
	case <-a.Changed():
		t.Fatal("two signals kept")
	default:
	}
	got := a.Servers()
	want := []Server{
		{Self: "urn:a", Host: "192.168.1.20", Port: 3000, Scheme: "http"},
		{Self: "urn:b", Host: "fd00::20", Port: 3001, Scheme: "http"},
		{Self: "urn:c", Host: "name.local", Port: 3002, Scheme: "http"},
		{Self: "urn:e", Host: "192.168.1.20", Port: 3443, Scheme: "https"},
	}
	if len(got) != len(want) {
		t.Fatalf("servers %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.Self != w.Self || g.Host != w.Host || g.Port != w.Port || g.Scheme != w.Scheme {
			t.Fatalf("server %d: %+v, want %+v", i, g, w)
		}
		if !slices.Equal(g.Roles, []string{"master", "main"}) || g.SWName != "signalk-server" || g.SWVers != "2.32.0" ||
			g.TXT["self"] != w.Self || !g.LastSeen.Equal(clk.Now()) || g.Source != "" {
			t.Fatalf("server %d details: %+v", i, g)
		}
	}
}
