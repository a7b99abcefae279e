package portal

import (
	"errors"
	"net"
	"testing"

	"github.com/miekg/dns"
)

func TestDNSAnswer(t *testing.T) {
	ip := net.IPv4(192, 168, 4, 1).To4()
	query := func(name string, qtype uint16) *dns.Msg { return new(dns.Msg).SetQuestion(name, qtype) }
	notify := query("a.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	two := query("a.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "b.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	none := query("a.", dns.TypeA)
	none.Question = nil
	chaos := query("version.bind.", dns.TypeA)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	resp := query("a.", dns.TypeA)
	resp.Response = true
	tests := []struct {
		name    string
		msg     *dns.Msg
		rcode   int
		answers int
		dropped bool
	}{
		{"A", query("connectivitycheck.gstatic.com.", dns.TypeA), dns.RcodeSuccess, 1, false},
		{"ANY", query("example.org.", dns.TypeANY), dns.RcodeSuccess, 1, false},
		{"A of the root", query(".", dns.TypeA), dns.RcodeSuccess, 1, false},
		{"AAAA is empty", query("captive.apple.com.", dns.TypeAAAA), dns.RcodeSuccess, 0, false},
		{"MX is empty", query("example.org.", dns.TypeMX), dns.RcodeSuccess, 0, false},
		{"CHAOS class is empty", chaos, dns.RcodeSuccess, 0, false},
		{"NOTIFY", notify, dns.RcodeNotImplemented, 0, false},
		{"two questions", two, dns.RcodeFormatError, 0, false},
		{"no question", none, dns.RcodeFormatError, 0, false},
		{"a response", resp, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.msg.Id = 4242
			pkt, err := tc.msg.Pack()
			if err != nil {
				t.Fatal(err)
			}
			out, err := dnsAnswer(pkt, ip)
			if tc.dropped {
				if !errors.Is(err, errNotQuery) || out != nil {
					t.Fatalf("got %v, %v; want dropped", out, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var r dns.Msg
			if err := r.Unpack(out); err != nil {
				t.Fatal(err)
			}
			if r.Id != 4242 || !r.Response || r.Rcode != tc.rcode || len(r.Answer) != tc.answers {
				t.Fatalf("reply id %d response %v rcode %s answers %v", r.Id, r.Response, dns.RcodeToString[r.Rcode], r.Answer)
			}
			if tc.answers == 1 {
				a := r.Answer[0].(*dns.A)
				if !a.A.Equal(ip) || a.Hdr.Ttl != DNSTTL || a.Hdr.Name != tc.msg.Question[0].Name {
					t.Fatalf("answer %v", a)
				}
			}
		})
	}
}

func TestDNSGarbageDropped(t *testing.T) {
	q, err := new(dns.Msg).SetQuestion("example.org.", dns.TypeA).Pack()
	if err != nil {
		t.Fatal(err)
	}
	for name, pkt := range map[string][]byte{
		"empty": nil, "one byte": {0}, "text": []byte("garbage garbage"),
		"truncated question": q[:len(q)-3],
	} {
		if out, err := dnsAnswer(pkt, net.IPv4(192, 168, 4, 1)); err == nil {
			t.Errorf("%s: answered %x", name, out)
		}
	}
}
