package portal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/jonboulle/clockwork"
	"golang.org/x/sys/unix"
)

// DHCP timing. The lease is two hours, as common access points hand out: long enough that a
// phone setting the device up never renews, short enough that a full pool drains by itself.
// An offer reserves its address for a minute while the client decides.
const (
	DefaultLeaseTime = 2 * time.Hour
	OfferHold        = time.Minute
)

// The portal's pool is its /24 without the network, broadcast and portal addresses: on a real
// portal 192.168.4.2 to 192.168.4.254 around 192.168.4.1; on the simulated board the same
// around the loopback portal address (127.4.1.2 … 127.4.1.254 for 127.4.1.1), where a lease
// is bookkeeping a test client can ask for over loopback.
var portalMask = net.CIDRMask(24, 32)

type lease struct {
	ip      net.IP
	expires time.Time
	bound   bool // ACKed; an unbound lease is an offer held for OfferHold
}

// leases is the DHCP server's table, one lease per client hardware address.
type leases struct {
	clk       clockwork.Clock
	server    net.IP
	leaseTime time.Duration

	mu    sync.Mutex
	byMAC map[string]*lease
}

func newLeases(clk clockwork.Clock, server net.IP, leaseTime time.Duration) *leases {
	return &leases{clk: clk, server: server.To4(), leaseTime: leaseTime, byMAC: map[string]*lease{}}
}

// bound counts the clients holding an ACKed, unexpired lease.
func (l *leases) bound() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	n := 0
	for _, ls := range l.byMAC {
		if ls.bound && now.Before(ls.expires) {
			n++
		}
	}
	return n
}

// inPool reports whether ip is one the portal may hand out.
func (l *leases) inPool(ip net.IP) bool {
	ip = ip.To4()
	if ip == nil || !ip.Mask(portalMask).Equal(l.server.Mask(portalMask)) || ip.Equal(l.server) {
		return false
	}
	return ip[3] != 0 && ip[3] != 255
}

// holderLocked returns the MAC holding ip now, "" when it is free.
func (l *leases) holderLocked(ip net.IP, now time.Time) string {
	for mac, ls := range l.byMAC {
		if ls.ip.Equal(ip) && now.Before(ls.expires) {
			return mac
		}
	}
	return ""
}

// offer reserves an address for mac: its own lease, else the one it asks for when free, else
// the lowest free one. It returns nil when the pool is exhausted.
func (l *leases) offer(mac string, want net.IP) net.IP {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	if ls, ok := l.byMAC[mac]; ok && now.Before(ls.expires) {
		return ls.ip
	}
	pick := net.IP(nil)
	if l.inPool(want) && l.holderLocked(want.To4(), now) == "" {
		pick = want.To4()
	} else {
		base := l.server.Mask(portalMask)
		for h := 1; h < 255 && pick == nil; h++ {
			ip := net.IPv4(base[0], base[1], base[2], byte(h)).To4()
			if l.inPool(ip) && l.holderLocked(ip, now) == "" {
				pick = ip
			}
		}
	}
	if pick == nil {
		return nil
	}
	l.byMAC[mac] = &lease{ip: pick, expires: now.Add(OfferHold)}
	return pick
}

// request binds ip to mac for the lease time when mac may have it; false means NAK.
func (l *leases) request(mac string, ip net.IP) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	if !l.inPool(ip) {
		return false
	}
	if h := l.holderLocked(ip.To4(), now); h != "" && h != mac {
		return false
	}
	l.byMAC[mac] = &lease{ip: ip.To4(), expires: now.Add(l.leaseTime), bound: true}
	return true
}

// release drops mac's lease (RELEASE, DECLINE, or a client that chose another server).
func (l *leases) release(mac string, boundToo bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, ok := l.byMAC[mac]; ok && (boundToo || !ls.bound) {
		delete(l.byMAC, mac)
	}
}

var errNotRequest = errors.New("not a client request")

// dhcpReply handles one DHCP packet and returns the reply to send, nil when none is due. A
// packet that does not parse, or is not a client's request, is an error: dropped and counted.
func dhcpReply(pkt []byte, l *leases) (*dhcpv4.DHCPv4, error) {
	req, err := dhcpv4.FromBytes(pkt)
	if err != nil {
		return nil, fmt.Errorf("dhcp parse: %w", err)
	}
	if req.OpCode != dhcpv4.OpcodeBootRequest || len(req.ClientHWAddr) == 0 {
		return nil, errNotRequest
	}
	mac := req.ClientHWAddr.String()
	server := l.server
	reply := func(mt dhcpv4.MessageType, yiaddr net.IP) (*dhcpv4.DHCPv4, error) {
		mods := []dhcpv4.Modifier{
			dhcpv4.WithMessageType(mt),
			dhcpv4.WithServerIP(server),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(server)),
		}
		if mt != dhcpv4.MessageTypeNak {
			mods = append(mods,
				dhcpv4.WithOption(dhcpv4.OptSubnetMask(portalMask)),
				dhcpv4.WithOption(dhcpv4.OptRouter(server)),
				dhcpv4.WithOption(dhcpv4.OptDNS(server)),
			)
		}
		if yiaddr != nil {
			mods = append(mods, dhcpv4.WithYourIP(yiaddr),
				dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(l.leaseTime)))
		}
		r, err := dhcpv4.NewReplyFromRequest(req, mods...)
		if err != nil {
			return nil, fmt.Errorf("dhcp reply: %w", err)
		}
		return r, nil
	}
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		ip := l.offer(mac, req.RequestedIPAddress())
		if ip == nil {
			return nil, nil // pool exhausted: stay silent, as servers do
		}
		return reply(dhcpv4.MessageTypeOffer, ip)
	case dhcpv4.MessageTypeRequest:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(server) {
			l.release(mac, false) // the client took another server's offer
			return nil, nil
		}
		ip := req.RequestedIPAddress()
		if ip == nil || ip.IsUnspecified() {
			ip = req.ClientIPAddr // renewing or rebinding
		}
		if !l.request(mac, ip) {
			return reply(dhcpv4.MessageTypeNak, nil)
		}
		return reply(dhcpv4.MessageTypeAck, ip.To4())
	case dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline:
		l.release(mac, true)
		return nil, nil
	case dhcpv4.MessageTypeInform:
		return reply(dhcpv4.MessageTypeAck, nil)
	default:
		return nil, errNotRequest
	}
}

// listenDHCP opens the server socket: on the portal address for a loopback portal, on the
// wildcard address tied to the interface for a real one (see the package comment). Unlike
// server4.NewIPv4UDPConn it sets no SO_REUSEPORT, so a second device on the same address
// fails its bind (and raises KeyBind) instead of silently sharing the port.
func listenDHCP(iface string, ip net.IP, port int) (*net.UDPConn, error) {
	host := ip.String()
	if iface != "" {
		host = "0.0.0.0"
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				return
			}
			if iface != "" {
				serr = unix.BindToDevice(int(fd), iface)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

func (p *Portal) startDHCP() error {
	conn, err := listenDHCP(p.opts.Iface, p.ip, p.opts.DHCPPort)
	if err != nil {
		return fmt.Errorf("dhcp :%d: %w", p.opts.DHCPPort, bindErr(err))
	}
	l, onIface := p.leases, p.opts.Iface != ""
	p.serveUDP(conn, "dhcp", &p.dhcpDropped, func(b []byte, from net.Addr) ([]byte, net.Addr, error) {
		r, err := dhcpReply(b, l)
		if err != nil || r == nil {
			return nil, nil, err
		}
		to := replyAddr(from.(*net.UDPAddr), onIface)
		if to == nil {
			return nil, nil, nil
		}
		return r.ToBytes(), to, nil
	})
	return nil
}

// replyAddr is where a reply goes: back to a client that already has an address (renewal, or
// a client on the loopback portal), else broadcast on the interface. A loopback portal never
// broadcasts: its traffic stays on loopback.
func replyAddr(from *net.UDPAddr, onIface bool) *net.UDPAddr {
	if from != nil && from.IP != nil && !from.IP.IsUnspecified() {
		return from
	}
	if !onIface {
		return nil
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
}
