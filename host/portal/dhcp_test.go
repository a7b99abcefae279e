package portal

import (
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/jonboulle/clockwork"
)

var server = net.IPv4(192, 168, 4, 1).To4()

func mac(n byte) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0, n} }

// exchange runs one message through the server and returns the reply's type and address.
func exchange(t *testing.T, l *leases, m *dhcpv4.DHCPv4) (dhcpv4.MessageType, net.IP) {
	t.Helper()
	r, err := dhcpReply(m.ToBytes(), l)
	if err != nil {
		t.Fatal(err)
	}
	if r == nil {
		return dhcpv4.MessageTypeNone, nil
	}
	if r.OpCode != dhcpv4.OpcodeBootReply || r.TransactionID != m.TransactionID {
		t.Fatalf("reply op %s xid %s", r.OpCode, r.TransactionID)
	}
	return r.MessageType(), r.YourIPAddr
}

func discover(t *testing.T, hw net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.NewDiscovery(hw, mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func request(t *testing.T, hw net.HardwareAddr, ip, sid net.IP) *dhcpv4.DHCPv4 {
	t.Helper()
	mods := []dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithHwAddr(hw), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ip))}
	if sid != nil {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(sid)))
	}
	m, err := dhcpv4.New(mods...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func msg(t *testing.T, hw net.HardwareAddr, mt dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.New(dhcpv4.WithMessageType(mt), dhcpv4.WithHwAddr(hw))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLeaseLife walks one client through the lease table step by step with a fake clock.
func TestLeaseLife(t *testing.T) {
	clk := clockwork.NewFakeClock()
	l := newLeases(clk, server, DefaultLeaseTime)
	ip2 := net.IPv4(192, 168, 4, 2).To4()
	ip3 := net.IPv4(192, 168, 4, 3).To4()

	steps := []struct {
		name    string
		advance time.Duration
		m       func() *dhcpv4.DHCPv4
		want    dhcpv4.MessageType
		ip      net.IP
		clients int
	}{
		{"discover offers the first free address", 0, func() *dhcpv4.DHCPv4 { return discover(t, mac(1)) }, dhcpv4.MessageTypeOffer, ip2, 0},
		{"a second discover offers the same", 0, func() *dhcpv4.DHCPv4 { return discover(t, mac(1)) }, dhcpv4.MessageTypeOffer, ip2, 0},
		{"another client gets the next", 0, func() *dhcpv4.DHCPv4 { return discover(t, mac(2)) }, dhcpv4.MessageTypeOffer, ip3, 0},
		{"request of the offer is acked", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(1), ip2, server) }, dhcpv4.MessageTypeAck, ip2, 1},
		{"request of another's offer is refused", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(1), ip3, server) }, dhcpv4.MessageTypeNak, nil, 1},
		{"request outside the pool is refused", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(4), net.IPv4(10, 0, 0, 9), nil) }, dhcpv4.MessageTypeNak, nil, 1},
		{"request of the portal address is refused", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(4), server, nil) }, dhcpv4.MessageTypeNak, nil, 1},
		{"request for another server drops the offer", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(2), ip3, net.IPv4(192, 168, 4, 99)) }, dhcpv4.MessageTypeNone, nil, 1},
		{"the dropped offer is free again", 0, func() *dhcpv4.DHCPv4 { return discover(t, mac(3)) }, dhcpv4.MessageTypeOffer, ip3, 1},
		{"an offer lapses after its hold", OfferHold, func() *dhcpv4.DHCPv4 { return discover(t, mac(5)) }, dhcpv4.MessageTypeOffer, ip3, 1},
		{"a bound client keeps its address", 0, func() *dhcpv4.DHCPv4 { return discover(t, mac(1)) }, dhcpv4.MessageTypeOffer, ip2, 1},
		{"the lease still holds just before its end", DefaultLeaseTime - OfferHold - time.Second, func() *dhcpv4.DHCPv4 { return msg(t, mac(9), dhcpv4.MessageTypeInform) }, dhcpv4.MessageTypeAck, net.IPv4zero.To4(), 1},
		{"the lease ends", time.Second, func() *dhcpv4.DHCPv4 { return msg(t, mac(9), dhcpv4.MessageTypeInform) }, dhcpv4.MessageTypeAck, net.IPv4zero.To4(), 0},
		{"renewal by a client without a lease of its address is acked", 0, func() *dhcpv4.DHCPv4 { return request(t, mac(1), ip2, nil) }, dhcpv4.MessageTypeAck, ip2, 1},
		{"release ends the lease", 0, func() *dhcpv4.DHCPv4 { return msg(t, mac(1), dhcpv4.MessageTypeRelease) }, dhcpv4.MessageTypeNone, nil, 0},
		{"decline drops the address", 0, func() *dhcpv4.DHCPv4 { return msg(t, mac(5), dhcpv4.MessageTypeDecline) }, dhcpv4.MessageTypeNone, nil, 0},
		{"a requested free address is offered", 0, func() *dhcpv4.DHCPv4 {
			return discover(t, mac(6), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IPv4(192, 168, 4, 77))))
		}, dhcpv4.MessageTypeOffer, net.IPv4(192, 168, 4, 77).To4(), 0},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		mt, ip := exchange(t, l, s.m())
		if mt != s.want || (s.ip != nil && !ip.Equal(s.ip)) {
			t.Fatalf("%s: got %s %v, want %s %v", s.name, mt, ip, s.want, s.ip)
		}
		if got := l.bound(); got != s.clients {
			t.Fatalf("%s: %d clients, want %d", s.name, got, s.clients)
		}
	}
}

func TestPoolExhausted(t *testing.T) {
	l := newLeases(clockwork.NewFakeClock(), server, DefaultLeaseTime)
	for i := 0; i < 253; i++ { // .2 … .254
		hw := net.HardwareAddr{0x02, 0, 0, 0, byte(i >> 8), byte(i)}
		if mt, _ := exchange(t, l, discover(t, hw)); mt != dhcpv4.MessageTypeOffer {
			t.Fatalf("client %d: %s", i, mt)
		}
	}
	if mt, _ := exchange(t, l, discover(t, net.HardwareAddr{0x06, 1, 2, 3, 4, 5})); mt != dhcpv4.MessageTypeNone {
		t.Fatalf("full pool answered %s", mt)
	}
}

func TestReplyOptions(t *testing.T) {
	l := newLeases(clockwork.NewFakeClock(), server, DefaultLeaseTime)
	r, err := dhcpReply(discover(t, mac(1)).ToBytes(), l)
	if err != nil {
		t.Fatal(err)
	}
	if r.SubnetMask().String() != "ffffff00" || !r.Router()[0].Equal(server) || !r.DNS()[0].Equal(server) ||
		!r.ServerIdentifier().Equal(server) || r.IPAddressLeaseTime(0) != DefaultLeaseTime {
		t.Fatalf("reply options: %s", r.Summary())
	}
}

func TestDHCPGarbageDropped(t *testing.T) {
	l := newLeases(clockwork.NewFakeClock(), server, DefaultLeaseTime)
	reply := discover(t, mac(1))
	reply.OpCode = dhcpv4.OpcodeBootReply
	offerMsg := msg(t, mac(1), dhcpv4.MessageTypeOffer)
	for name, pkt := range map[string][]byte{
		"empty": nil, "short": []byte("hello"), "a reply": reply.ToBytes(), "an offer from a client": offerMsg.ToBytes(),
		"truncated options": discover(t, mac(1)).ToBytes()[:245],
	} {
		if r, err := dhcpReply(pkt, l); err == nil {
			t.Errorf("%s: no error (reply %v)", name, r)
		}
	}
}

func TestReplyAddr(t *testing.T) {
	peer := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
	zero := &net.UDPAddr{IP: net.IPv4zero, Port: 68}
	if got := replyAddr(peer, false); got != peer {
		t.Errorf("loopback client: %v", got)
	}
	if got := replyAddr(zero, false); got != nil {
		t.Errorf("loopback portal broadcast: %v", got)
	}
	if got := replyAddr(zero, true); !got.IP.Equal(net.IPv4bcast) || got.Port != 68 {
		t.Errorf("interface broadcast: %v", got)
	}
}
