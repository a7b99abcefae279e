package portal

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/miekg/dns"

	"devhost/host/testio"
)

func TestUpDownListener(t *testing.T) {
	ip := testIP(t)
	r := newRig(t, ip)
	base := fmt.Sprintf("http://%s:%d", ip, r.port)
	if _, err := net.Dial("tcp4", net.JoinHostPort(ip, "8080")); err == nil {
		t.Fatal("portal listener exists before Up")
	}
	for round := range 2 { // up, down, and up again
		if err := r.p.Up("dev-abcd", ""); err != nil {
			t.Fatalf("round %d: Up: %v", round, err)
		}
		if err := r.p.Up("dev-abcd", ""); err != nil { // idempotent
			t.Fatalf("round %d: second Up: %v", round, err)
		}
		if r.p.IP() != ip {
			t.Fatalf("IP() = %q while up, want %q", r.p.IP(), ip)
		}
		resp := get(t, base+"/")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("portal root: %d", resp.StatusCode)
		}
		if st, _ := r.h.get(KeyBind); st != "normal" {
			t.Fatalf("%s = %q after a clean Up", KeyBind, st)
		}
		r.p.Down()
		r.p.Down() // idempotent
		if r.p.IP() != "" {
			t.Fatalf("IP() = %q while down", r.p.IP())
		}
		_, err := net.Dial("tcp4", net.JoinHostPort(ip, "8080"))
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("round %d: dial after Down: %v, want connection refused", round, err)
		}
	}
}

func TestProbes(t *testing.T) {
	ip := testIP(t)
	r := newRig(t, ip)
	if err := r.p.Up("dev-abcd", ""); err != nil {
		t.Fatal(err)
	}
	const key = "correct horse battery"
	tests := []struct {
		name     string
		port     int // httpd.port
		key      string
		portal   bool
		bearer   string
		status   int
		location string
	}{
		{"portal, no key", 8080, "", true, "", 302, "http://" + ip + ":8080/"},
		{"portal, key set", 8080, key, true, "", 302, "http://" + ip + ":8080/"},
		{"station, no key", 8080, "", false, "", 302, "http://" + ip + ":8080/"},
		{"station, key set", 8080, key, false, "", 401, ""},
		{"station, key and bearer", 8080, key, false, key, 302, "http://" + ip + ":8080/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r.setKey(tc.key)
			for _, path := range ProbePaths {
				base := r.station
				if tc.portal {
					base = fmt.Sprintf("http://%s:%d", ip, r.port)
				}
				var hdr []string
				if tc.bearer != "" {
					hdr = []string{"Authorization", "Bearer " + tc.bearer}
				}
				for _, url := range []string{base + "/api/v1" + path, base + path} {
					resp := get(t, url, hdr...)
					if resp.StatusCode != tc.status {
						t.Fatalf("%s: status %d, want %d", url, resp.StatusCode, tc.status)
					}
					if got := resp.Header.Get("Location"); got != tc.location {
						t.Fatalf("%s: Location %q, want %q", url, got, tc.location)
					}
				}
			}
		})
	}
}

func TestRootURL(t *testing.T) {
	for _, tc := range []struct {
		port int
		want string
	}{{80, "http://192.168.4.1/"}, {8080, "http://192.168.4.1:8080/"}, {1, "http://192.168.4.1:1/"}} {
		p := New(Options{IP: "192.168.4.1", HTTPPort: func() int { return tc.port }})
		if got := p.RootURL(); got != tc.want {
			t.Errorf("port %d: %q, want %q", tc.port, got, tc.want)
		}
	}
	if got := New(Options{IP: "192.168.4.1"}).RootURL(); got != "http://192.168.4.1/" {
		t.Errorf("no port function: %q", got)
	}
}

func TestDNSOverLoopback(t *testing.T) {
	ip := testIP(t)
	r := newRig(t, ip)
	if err := r.p.Up("dev-abcd", ""); err != nil {
		t.Fatal(err)
	}
	c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
	for _, name := range []string{"connectivitycheck.gstatic.com.", "captive.apple.com.", "x.", "dev.local."} {
		in, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), net.JoinHostPort(ip, "53"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != ip {
			t.Fatalf("%s: answer %v, want %s", name, in.Answer, ip)
		}
	}
	conn, err := net.Dial("udp4", net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := r.p.Stats().DNSDropped
	if _, err := conn.Write([]byte("\x00\x01garbage")); err != nil {
		t.Fatal(err)
	}
	testio.Eventually(t, grace, func() bool { return r.p.Stats().DNSDropped == before+1 })
	// The responder still answers after the garbage.
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("after.", dns.TypeA), net.JoinHostPort(ip, "53")); err != nil {
		t.Fatalf("after garbage: %v", err)
	}
}

// dhcpExchange sends one DHCP message from a loopback client socket and reads the reply.
func dhcpExchange(t *testing.T, conn *net.UDPConn, to string, m *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	dst, err := net.ResolveUDPAddr("udp4", to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteToUDP(m.ToBytes(), dst); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1500)
	n, _, err := conn.ReadFromUDP(buf)
	if err != nil {
		t.Fatalf("read the reply to %s: %v", m.MessageType(), err)
	}
	r, err := dhcpv4.FromBytes(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDHCPOverLoopback(t *testing.T) {
	ip := testIP(t)
	r := newRig(t, ip)
	if err := r.p.Up("dev-abcd", ""); err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	srv := net.JoinHostPort(ip, "67")
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	disc, err := dhcpv4.NewDiscovery(mac)
	if err != nil {
		t.Fatal(err)
	}
	offer := dhcpExchange(t, conn, srv, disc)
	if offer.MessageType() != dhcpv4.MessageTypeOffer {
		t.Fatalf("got %s, want OFFER", offer.MessageType())
	}
	want := strings.TrimSuffix(ip, ".1") + ".2"
	if offer.YourIPAddr.String() != want || !offer.ServerIdentifier().Equal(net.ParseIP(ip)) {
		t.Fatalf("offer %s from %s, want %s from %s", offer.YourIPAddr, offer.ServerIdentifier(), want, ip)
	}
	if r.p.Clients() != 0 {
		t.Fatalf("Clients() = %d after an offer", r.p.Clients())
	}
	req, err := dhcpv4.NewRequestFromOffer(offer)
	if err != nil {
		t.Fatal(err)
	}
	ack := dhcpExchange(t, conn, srv, req)
	if ack.MessageType() != dhcpv4.MessageTypeAck || ack.YourIPAddr.String() != want {
		t.Fatalf("got %s for %s", ack.MessageType(), ack.YourIPAddr)
	}
	if got := ack.IPAddressLeaseTime(0); got != DefaultLeaseTime {
		t.Fatalf("lease time %v", got)
	}
	if d := ack.DNS(); len(d) != 1 || !d[0].Equal(net.ParseIP(ip)) {
		t.Fatalf("DNS option %v", d)
	}
	if r.p.Clients() != 1 {
		t.Fatalf("Clients() = %d after an ACK", r.p.Clients())
	}
	before := r.p.Stats().DHCPDropped
	if _, err := conn.WriteToUDP([]byte("not dhcp"), &net.UDPAddr{IP: net.ParseIP(ip), Port: 67}); err != nil {
		t.Fatal(err)
	}
	testio.Eventually(t, grace, func() bool { return r.p.Stats().DHCPDropped == before+1 })
	r.p.Down()
	if r.p.Clients() != 0 {
		t.Fatalf("Clients() = %d while down", r.p.Clients())
	}
}

// upWithDNSTaken brings a portal up on a fresh address whose DNS port another socket holds,
// checks that Up names dns, and answers the rig and that socket.
func upWithDNSTaken(t *testing.T) (*rig, net.PacketConn) {
	t.Helper()
	ip := testIP(t)
	r := newRig(t, ip)
	squat, err := net.ListenPacket("udp4", net.JoinHostPort(ip, "53"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.p.Up("dev-abcd", ""); err == nil || !strings.Contains(err.Error(), "dns") {
		t.Fatalf("Up with port 53 taken: %v, want an error naming dns", err)
	}
	return r, squat
}

func TestBindFailureRaisesHealth(t *testing.T) {
	r, squat := upWithDNSTaken(t)
	ip := r.ip
	if st, msg := r.h.get(KeyBind); st != "warn" || !strings.Contains(msg, "dns") || strings.Contains(msg, "\n") {
		t.Fatalf("%s = %q %q", KeyBind, st, msg)
	}
	// The rest of the portal runs.
	if resp := get(t, fmt.Sprintf("http://%s:%d/", ip, r.port)); resp.StatusCode != 200 {
		t.Fatalf("portal root: %d", resp.StatusCode)
	}
	r.p.Down()
	if st, _ := r.h.get(KeyBind); st != "normal" {
		t.Fatalf("%s = %q after Down", KeyBind, st)
	}
	_ = squat.Close()
	if err := r.p.Up("dev-abcd", ""); err != nil {
		t.Fatalf("Up once the port is free: %v", err)
	}
	if st, _ := r.h.get(KeyBind); st != "normal" {
		t.Fatalf("%s = %q after a clean Up", KeyBind, st)
	}
	// The station manager (host/wifi) logs the portal coming up, failing and going down; the
	// portal itself says it only through the health table and Up's error, not a second line.
	r.p.Down()
	if l := r.log.Read(-1, -1).Lines; len(l) != 0 {
		t.Fatalf("portal log after a failed Up, Down and a clean Up and Down: %q", l)
	}
}

// A service whose bind failed is started by the next Up, without taking the running ones
// down: the station manager calls Up again at its next input, and a transient clash (another
// process on the address for a while) must not leave the portal without its DNS, DHCP or
// listener for the rest of the boot.
func TestUpRetriesFailedServices(t *testing.T) {
	r, squat := upWithDNSTaken(t)
	ip := r.ip
	if err := r.p.Up("dev-abcd", ""); err == nil || !strings.Contains(err.Error(), "dns") {
		t.Fatalf("Up again with port 53 still taken: %v, want an error naming dns", err)
	}
	_ = squat.Close()
	if err := r.p.Up("dev-abcd", ""); err != nil {
		t.Fatalf("Up once the port is free: %v", err)
	}
	if st, msg := r.h.get(KeyBind); st != "normal" {
		t.Fatalf("%s = %q %q once every service runs", KeyBind, st, msg)
	}
	c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
	in, _, err := c.Exchange(new(dns.Msg).SetQuestion("captive.apple.com.", dns.TypeA), net.JoinHostPort(ip, "53"))
	if err != nil || len(in.Answer) != 1 {
		t.Fatalf("DNS after the retry: %v %v", in, err)
	}
	// The listener that ran throughout was left alone.
	if resp := get(t, fmt.Sprintf("http://%s:%d/", ip, r.port)); resp.StatusCode != 200 {
		t.Fatalf("portal root: %d", resp.StatusCode)
	}
}

func TestSideBySide(t *testing.T) {
	a, b := newRig(t, testIP(t)), newRig(t, testIP(t))
	if a.ip == b.ip {
		t.Skip("the random addresses collided")
	}
	for _, r := range []*rig{a, b} {
		if err := r.p.Up("dev", ""); err != nil {
			t.Fatalf("portal %s: %v", r.ip, err)
		}
	}
	// A second portal on the same address fails its binds and says so.
	c := newRig(t, a.ip)
	if err := c.p.Up("dev", ""); err == nil {
		t.Fatal("a second portal on the same address bound everything")
	}
	st, msg := c.h.get(KeyBind)
	if st != "warn" || strings.Contains(msg, "\n") {
		t.Fatalf("%s = %q %q", KeyBind, st, msg)
	}
	for _, svc := range []string{"http", "dns", "dhcp"} {
		if !strings.Contains(msg, svc+" ") {
			t.Fatalf("%s message %q does not name %s", KeyBind, msg, svc)
		}
	}
}

func TestBadAddress(t *testing.T) {
	h := &healthLog{}
	p := New(Options{IP: "not-an-ip", Health: h})
	if err := p.Up("x", ""); err == nil {
		t.Fatal("Up with a bad address succeeded")
	}
	if st, _ := h.get(KeyBind); st != "warn" {
		t.Fatalf("%s = %q", KeyBind, st)
	}
	if p.IP() != "" || p.Clients() != 0 {
		t.Fatal("a portal that could not come up reports an address or clients")
	}
}

func TestNoOwnListenerWhenServedElsewhere(t *testing.T) {
	ip := testIP(t)
	h := &healthLog{}
	p := New(Options{IP: ip, HTTPPort: func() int { return 8080 }, Health: h})
	if err := p.Up("dev", ""); err != nil {
		t.Fatalf("Up without a Serve function: %v", err)
	}
	defer p.Down()
	if st, _ := h.get(KeyBind); st != "normal" {
		t.Fatalf("%s = %q", KeyBind, st)
	}
	if c, err := net.Dial("tcp4", net.JoinHostPort(ip, "8080")); err == nil {
		c.Close()
		t.Fatal("a listener of the portal's own exists")
	}
	if p.IP() != ip {
		t.Fatalf("IP() = %q", p.IP())
	}
}
