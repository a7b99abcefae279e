package portal

import (
	"net"
	"testing"

	"github.com/jonboulle/clockwork"
)

// The seed corpora are checked in under testdata/fuzz: packets captured from the real clients
// (dig's A query, udhcpc's DISCOVER), messages as clients send them (an EDNS query of each
// common type, DISCOVER, REQUEST, RELEASE), truncated variants of them and plain garbage.

// FuzzDNSAnswer feeds arbitrary packets to the DNS responder's entry point: it must never
// panic, and whatever it answers must itself parse.
func FuzzDNSAnswer(f *testing.F) {
	ip := net.IPv4(192, 168, 4, 1)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		out, err := dnsAnswer(pkt, ip)
		if err != nil {
			return
		}
		if _, err := dnsAnswer(out, ip); err != errNotQuery {
			t.Fatalf("the answer does not read back as a response: %v", err)
		}
	})
}

// FuzzDHCPReply feeds arbitrary packets to the DHCP server's entry point: it must never
// panic, never lease an address outside the pool, and its replies must serialise.
func FuzzDHCPReply(f *testing.F) {
	server := net.IPv4(192, 168, 4, 1).To4()
	f.Fuzz(func(t *testing.T, pkt []byte) {
		l := newLeases(clockwork.NewFakeClock(), server, DefaultLeaseTime)
		r, err := dhcpReply(pkt, l)
		if err != nil || r == nil {
			return
		}
		_ = r.ToBytes()
		if y := r.YourIPAddr; y != nil && !y.IsUnspecified() && !l.inPool(y) {
			t.Fatalf("leased %s outside the pool", y)
		}
	})
}
