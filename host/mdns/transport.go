package mdns

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

var groupAddr = &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: mdnsPort}

// iface is one interface the responder works on, with its IPv4 addresses.
type iface struct {
	Index    int
	Name     string
	MTU      int
	Loopback bool
	Addrs    []netip.Prefix // IPv4: the host's A records on this interface
	Addrs6   []netip.Addr   // IPv6: the host's AAAA answers
	netIf    net.Interface
}

// payloadLimit is the largest UDP payload to send on the interface (RFC 6762 §17).
func (f iface) payloadLimit() int {
	mtu := f.MTU
	if mtu <= 0 || mtu > 9000 {
		mtu = 9000
	}
	if mtu < 576 {
		mtu = 576
	}
	return mtu - 28
}

// onLink reports whether a source address belongs to the interface's subnets.
func (f iface) onLink(a netip.Addr) bool {
	a = a.Unmap()
	if f.Loopback && a.IsLoopback() {
		return true
	}
	for _, p := range f.Addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// listInterfaces picks the interfaces to work on: the named ones (loopback allowed, for tests
// and odd setups), else every interface that is up, multicast-capable, not loopback and has an
// IPv4 address.
func listInterfaces(names []string) ([]iface, error) {
	all, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("mdns: list interfaces: %w", err)
	}
	var out []iface
	for _, ni := range all {
		named := slices.Contains(names, ni.Name)
		if len(names) > 0 && !named {
			continue
		}
		if ni.Flags&net.FlagUp == 0 || ni.Flags&net.FlagMulticast == 0 {
			continue
		}
		loop := ni.Flags&net.FlagLoopback != 0
		if loop && !named {
			continue
		}
		addrs, err := ni.Addrs()
		if err != nil {
			continue
		}
		f := iface{Index: ni.Index, Name: ni.Name, MTU: ni.MTU, Loopback: loop, netIf: ni}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			if !ip.Unmap().Is4() {
				f.Addrs6 = append(f.Addrs6, ip)
				continue
			}
			ones, _ := ipn.Mask.Size()
			if len(ipn.Mask) == net.IPv6len {
				ones -= 96
			}
			f.Addrs = append(f.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
		}
		if len(f.Addrs) > 0 {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoInterface
	}
	return out, nil
}

// listenReuse opens a UDP socket on the mDNS port that other mDNS stacks on the host (and the
// multicast plumbing's own socket) can share.
func listenReuse(ctx context.Context) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(ctx, "udp4", fmt.Sprintf("0.0.0.0:%d", mdnsPort))
	if err != nil {
		return nil, fmt.Errorf("mdns: listen on udp4 port %d: %w", mdnsPort, err)
	}
	return pc, nil
}

// transport is this package's own socket on the mDNS port: it sends probes, announcements,
// goodbyes, answers and queries from port 5353 and sees every multicast packet on the link.
type transport struct {
	conn   net.PacketConn
	pc     *ipv4.PacketConn
	ifaces map[int]iface
	log    *slog.Logger
	done   chan struct{}
}

func openTransport(names []string, log *slog.Logger) (*transport, error) {
	ifs, err := listInterfaces(names)
	if err != nil {
		return nil, err
	}
	conn, err := listenReuse(context.Background())
	if err != nil {
		return nil, err
	}
	pc := ipv4.NewPacketConn(conn)
	fail := func(err error) (*transport, error) {
		_ = conn.Close()
		return nil, err
	}
	if err := pc.SetControlMessage(ipv4.FlagInterface|ipv4.FlagDst, true); err != nil {
		return fail(fmt.Errorf("mdns: control messages: %w", err))
	}
	// Other stacks on this host must hear us too; 255 is the TTL RFC 6762 §11 asks for.
	if err := pc.SetMulticastLoopback(true); err != nil {
		return fail(fmt.Errorf("mdns: multicast loopback: %w", err))
	}
	if err := pc.SetMulticastTTL(255); err != nil {
		return fail(fmt.Errorf("mdns: multicast TTL: %w", err))
	}
	if err := pc.SetTTL(255); err != nil {
		return fail(fmt.Errorf("mdns: TTL: %w", err))
	}
	t := &transport{conn: conn, pc: pc, ifaces: map[int]iface{}, log: log, done: make(chan struct{})}
	for _, f := range ifs {
		if err := pc.JoinGroup(&f.netIf, groupAddr); err != nil {
			log.Warn("mdns: cannot join the group", "iface", f.Name, "err", err)
			continue
		}
		t.ifaces[f.Index] = f
	}
	if len(t.ifaces) == 0 {
		return fail(ErrNoInterface)
	}
	return t, nil
}

// sortedIfaces lists the interfaces in index order, so sends are deterministic.
func (t *transport) sortedIfaces() []iface {
	out := make([]iface, 0, len(t.ifaces))
	for _, f := range t.ifaces {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b iface) int { return a.Index - b.Index })
	return out
}

// send writes one packet out of the interface: to the group when dst is nil.
func (t *transport) send(b []byte, ifIndex int, dst *net.UDPAddr) {
	dst = cmp.Or(dst, groupAddr)
	if _, err := t.pc.WriteTo(b, &ipv4.ControlMessage{IfIndex: ifIndex}, dst); err != nil {
		t.log.Debug("mdns: send failed", "iface", ifIndex, "dst", dst, "err", err)
	}
}

// read delivers packets until the socket closes; packets that arrive on an interface the
// transport does not work on are dropped (the kernel hands a socket every group's traffic).
func (t *transport) read(handle func(b []byte, src *net.UDPAddr, ifIndex int)) {
	defer close(t.done)
	buf := make([]byte, 9000)
	for {
		n, cm, src, err := t.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.log.Debug("mdns: read failed", "err", err)
			continue
		}
		usrc, ok := src.(*net.UDPAddr)
		if !ok || cm == nil {
			continue
		}
		if _, ok := t.ifaces[cm.IfIndex]; !ok {
			continue
		}
		handle(buf[:n], usrc, cm.IfIndex)
	}
}

// addrOf is the IP address of a UDP address.
func addrOf(a *net.UDPAddr) netip.Addr {
	ip, _ := netip.AddrFromSlice(a.IP)
	return ip.Unmap()
}

func (t *transport) close() {
	_ = t.conn.Close()
}
