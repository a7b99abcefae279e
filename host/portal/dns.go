package portal

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/miekg/dns"
)

// DNSTTL is the TTL of the portal's answers, in seconds: short, so a phone that leaves the
// portal for the boat's network does not keep resolving every name to the portal.
const DNSTTL = 1

// errNotQuery marks a packet that parsed but is not a question to answer (a response).
var errNotQuery = errors.New("not a query")

// dnsAnswer builds the reply to one DNS packet: every A (or ANY) question gets the portal
// address; other types get an empty NOERROR answer (so clients fall back to IPv4); a query
// with an opcode other than QUERY gets NOTIMP and one without exactly one question FORMERR.
// A packet that does not parse, or a response, is an error: it is dropped without a reply.
func dnsAnswer(pkt []byte, ip net.IP) ([]byte, error) {
	var q dns.Msg
	if err := q.Unpack(pkt); err != nil {
		return nil, fmt.Errorf("dns unpack: %w", err)
	}
	if q.Response {
		return nil, errNotQuery
	}
	r := new(dns.Msg)
	r.Id = q.Id
	r.Response = true
	r.Opcode = q.Opcode
	r.RecursionDesired = q.RecursionDesired
	r.RecursionAvailable = true
	r.Question = q.Question
	switch {
	case q.Opcode != dns.OpcodeQuery:
		r.Rcode = dns.RcodeNotImplemented
	case len(q.Question) != 1:
		r.Rcode = dns.RcodeFormatError
	default:
		r.Authoritative = true
		qq := q.Question[0]
		if (qq.Qtype == dns.TypeA || qq.Qtype == dns.TypeANY) && qq.Qclass == dns.ClassINET {
			r.Answer = []dns.RR{&dns.A{
				Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: DNSTTL},
				A:   ip,
			}}
		}
	}
	b, err := r.Pack()
	if err != nil {
		return nil, fmt.Errorf("dns pack: %w", err)
	}
	return b, nil
}

func (p *Portal) startDNS() error {
	addr := net.JoinHostPort(p.ip.String(), strconv.Itoa(p.opts.DNSPort))
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return fmt.Errorf("dns %s: %w", addr, bindErr(err))
	}
	ip := p.ip
	p.serveUDP(pc, "dns", &p.dnsDropped, func(b []byte, from net.Addr) ([]byte, net.Addr, error) {
		out, err := dnsAnswer(b, ip)
		return out, from, err
	})
	return nil
}

// serveUDP answers the datagrams on pc until Down closes it. answer gives the reply and where
// it goes; a nil reply is no answer, and an error counts the datagram in dropped.
func (p *Portal) serveUDP(pc net.PacketConn, proto string, dropped *atomic.Uint64, answer func(b []byte, from net.Addr) ([]byte, net.Addr, error)) {
	p.conns = append(p.conns, pc)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return // closed by Down
			}
			out, to, err := answer(buf[:n], from)
			if err != nil {
				dropped.Add(1)
				p.log.Debug(proto+" packet dropped", "from", from.String(), "err", err)
				continue
			}
			if out == nil {
				continue
			}
			if _, err := pc.WriteTo(out, to); err != nil {
				p.log.Debug(proto+" reply", "to", to.String(), "err", err)
			}
		}
	}()
}
