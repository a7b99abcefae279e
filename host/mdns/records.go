package mdns

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// Wire constants of RFC 6762.
const (
	mdnsPort   = 5353
	classFlush = 1 << 15 // cache-flush bit of a record's class
	classQU    = 1 << 15 // unicast-response bit of a question's class

	// TTLs of RFC 6762 §10: records naming a host 120 s, the others 75 minutes.
	ttlHost  = 120
	ttlOther = 4500
	// ttlLegacy caps the TTL of answers to legacy (non-5353) queriers (RFC 6762 §6.7).
	ttlLegacy = 10

	domain         = "local."
	enumerationFQN = "_services._dns-sd._udp.local."

	// maxRecordsPerMessage bounds what one parsed packet may add to a cache.
	maxRecordsPerMessage = 256
)

// record is one class-IN resource record as this package builds and reads it.
type record struct {
	Name     string // fully qualified, with the trailing dot
	Type     dnsmessage.Type
	Flush    bool // cache-flush bit: the record is unique to its owner
	TTL      uint32
	Target   string // PTR and SRV
	Priority uint16 // SRV
	Weight   uint16 // SRV
	Port     uint16 // SRV
	Text     []string
	Addr     netip.Addr // A and AAAA
}

// question is one mDNS question (class IN).
type question struct {
	Name string
	Type dnsmessage.Type
	QU   bool
}

// message is a parsed or to-be-built mDNS packet.
type message struct {
	ID          uint16
	Response    bool
	Questions   []question
	Answers     []record
	Authorities []record
	Additionals []record
}

var errIgnored = errors.New("mdns: message ignored")

// parseMessage reads one mDNS packet. Records of classes other than IN and of types other than
// A, AAAA, PTR, SRV and TXT are skipped; a packet with a non-zero opcode or rcode is ignored
// (RFC 6762 §18.3, §18.11). A malformed packet yields an error and no records.
func parseMessage(b []byte) (message, error) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		return message{}, fmt.Errorf("mdns: parse header: %w", err)
	}
	if h.OpCode != 0 || h.RCode != dnsmessage.RCodeSuccess {
		return message{}, errIgnored
	}
	m := message{ID: h.ID, Response: h.Response}
	budget := maxRecordsPerMessage
	for {
		q, err := p.Question()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return message{}, fmt.Errorf("mdns: parse question: %w", err)
		}
		if budget--; budget < 0 {
			return m, nil
		}
		cls := q.Class &^ classQU
		if cls != dnsmessage.ClassINET && cls != dnsmessage.ClassANY {
			continue
		}
		m.Questions = append(m.Questions, question{Name: q.Name.String(), Type: q.Type, QU: q.Class&classQU != 0})
	}
	sections := []struct {
		header func() (dnsmessage.ResourceHeader, error)
		out    *[]record
	}{
		{p.AnswerHeader, &m.Answers},
		{p.AuthorityHeader, &m.Authorities},
		{p.AdditionalHeader, &m.Additionals},
	}
	for _, sec := range sections {
		for {
			hdr, err := sec.header()
			if errors.Is(err, dnsmessage.ErrSectionDone) {
				break
			}
			if err != nil {
				return message{}, fmt.Errorf("mdns: parse record header: %w", err)
			}
			if budget--; budget < 0 {
				return m, nil
			}
			rec, ok, err := parseBody(&p, hdr)
			if err != nil {
				return message{}, fmt.Errorf("mdns: parse %v record %s: %w", hdr.Type, hdr.Name, err)
			}
			if ok {
				*sec.out = append(*sec.out, rec)
			}
		}
	}
	return m, nil
}

// parseBody reads the body of the record whose header was just read; ok is false for a record
// this package does not use (its body is skipped).
func parseBody(p *dnsmessage.Parser, hdr dnsmessage.ResourceHeader) (record, bool, error) {
	rec := record{
		Name:  hdr.Name.String(),
		Type:  hdr.Type,
		Flush: hdr.Class&classFlush != 0,
		TTL:   hdr.TTL,
	}
	if hdr.Class&^classFlush != dnsmessage.ClassINET {
		_, err := p.UnknownResource()
		return record{}, false, err
	}
	switch hdr.Type {
	case dnsmessage.TypeA:
		a, err := p.AResource()
		if err != nil {
			return record{}, false, err
		}
		rec.Addr = netip.AddrFrom4(a.A)
	case dnsmessage.TypeAAAA:
		a, err := p.AAAAResource()
		if err != nil {
			return record{}, false, err
		}
		rec.Addr = netip.AddrFrom16(a.AAAA)
	case dnsmessage.TypePTR:
		ptr, err := p.PTRResource()
		if err != nil {
			return record{}, false, err
		}
		rec.Target = ptr.PTR.String()
	case dnsmessage.TypeSRV:
		srv, err := p.SRVResource()
		if err != nil {
			return record{}, false, err
		}
		rec.Target = srv.Target.String()
		rec.Priority, rec.Weight, rec.Port = srv.Priority, srv.Weight, srv.Port
	case dnsmessage.TypeTXT:
		txt, err := p.TXTResource()
		if err != nil {
			return record{}, false, err
		}
		rec.Text = txt.TXT
	default:
		_, err := p.UnknownResource()
		return record{}, false, err
	}
	return rec, true, nil
}

// pack builds the packet. Names are compressed; a response is marked authoritative.
func (m *message) pack() ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), dnsmessage.Header{
		ID:            m.ID,
		Response:      m.Response,
		Authoritative: m.Response,
	})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, fmt.Errorf("mdns: build: %w", err)
	}
	for _, q := range m.Questions {
		name, err := dnsmessage.NewName(q.Name)
		if err != nil {
			return nil, fmt.Errorf("mdns: question name %q: %w", q.Name, err)
		}
		cls := dnsmessage.ClassINET
		if q.QU {
			cls |= classQU
		}
		if err := b.Question(dnsmessage.Question{Name: name, Type: q.Type, Class: cls}); err != nil {
			return nil, fmt.Errorf("mdns: question %q: %w", q.Name, err)
		}
	}
	sections := []struct {
		start func() error
		recs  []record
	}{
		{b.StartAnswers, m.Answers},
		{b.StartAuthorities, m.Authorities},
		{b.StartAdditionals, m.Additionals},
	}
	for _, sec := range sections {
		if err := sec.start(); err != nil {
			return nil, fmt.Errorf("mdns: build: %w", err)
		}
		for _, r := range sec.recs {
			if err := addRecord(&b, r); err != nil {
				return nil, err
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil, fmt.Errorf("mdns: build: %w", err)
	}
	return out, nil
}

func addRecord(b *dnsmessage.Builder, r record) error {
	name, err := dnsmessage.NewName(r.Name)
	if err != nil {
		return fmt.Errorf("mdns: record name %q: %w", r.Name, err)
	}
	cls := dnsmessage.ClassINET
	if r.Flush {
		cls |= classFlush
	}
	hdr := dnsmessage.ResourceHeader{Name: name, Type: r.Type, Class: cls, TTL: r.TTL}
	switch r.Type {
	case dnsmessage.TypeA:
		if !r.Addr.Is4() {
			return fmt.Errorf("mdns: A record %q with address %v", r.Name, r.Addr)
		}
		err = b.AResource(hdr, dnsmessage.AResource{A: r.Addr.As4()})
	case dnsmessage.TypeAAAA:
		if !r.Addr.Is6() {
			return fmt.Errorf("mdns: AAAA record %q with address %v", r.Name, r.Addr)
		}
		err = b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: r.Addr.As16()})
	case dnsmessage.TypePTR:
		var target dnsmessage.Name
		if target, err = dnsmessage.NewName(r.Target); err == nil {
			err = b.PTRResource(hdr, dnsmessage.PTRResource{PTR: target})
		}
	case dnsmessage.TypeSRV:
		var target dnsmessage.Name
		if target, err = dnsmessage.NewName(r.Target); err == nil {
			err = b.SRVResource(hdr, dnsmessage.SRVResource{Priority: r.Priority, Weight: r.Weight, Port: r.Port, Target: target})
		}
	case dnsmessage.TypeTXT:
		text := r.Text
		if len(text) == 0 {
			// An empty TXT record is one empty string (RFC 6763 §6.1).
			text = []string{""}
		}
		err = b.TXTResource(hdr, dnsmessage.TXTResource{TXT: text})
	default:
		return fmt.Errorf("mdns: cannot build a %v record", r.Type)
	}
	if err != nil {
		return fmt.Errorf("mdns: %v record %q: %w", r.Type, r.Name, err)
	}
	return nil
}

// rdata is the record's data in uncompressed wire form, the order RFC 6762 §8.2 compares.
func (r record) rdata() []byte {
	switch r.Type {
	case dnsmessage.TypeA:
		if !r.Addr.Is4() {
			return nil
		}
		a := r.Addr.As4()
		return a[:]
	case dnsmessage.TypeAAAA:
		a := r.Addr.As16()
		return a[:]
	case dnsmessage.TypePTR:
		return wireName(nil, r.Target)
	case dnsmessage.TypeSRV:
		b := []byte{byte(r.Priority >> 8), byte(r.Priority), byte(r.Weight >> 8), byte(r.Weight), byte(r.Port >> 8), byte(r.Port)}
		return wireName(b, r.Target)
	case dnsmessage.TypeTXT:
		var b []byte
		text := r.Text
		if len(text) == 0 {
			text = []string{""}
		}
		for _, s := range text {
			b = append(b, byte(len(s)))
			b = append(b, s...)
		}
		return b
	}
	return nil
}

// wireName appends the name's labels as length-prefixed strings and the root label.
func wireName(b []byte, name string) []byte {
	for _, l := range strings.Split(strings.TrimSuffix(name, "."), ".") {
		if l == "" {
			continue
		}
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	return append(b, 0)
}

// sameData reports whether two records carry the same owner, type and data (TTL and flush bit
// aside): the test for "this is my own record" in conflict detection and known answers.
func sameData(a, b record) bool {
	return a.Type == b.Type && strings.EqualFold(a.Name, b.Name) && bytes.Equal(a.rdata(), b.rdata())
}

// cacheKey identifies a record in a browse cache.
func (r record) cacheKey() string {
	return fmt.Sprintf("%s|%d|%x", strings.ToLower(r.Name), r.Type, r.rdata())
}

// compareProbes orders two probes' proposed records as RFC 6762 §8.2 tie-breaking does:
// sorted by class, type and rdata, compared pairwise, a longer set winning a common prefix.
// A positive result means ours is lexicographically later (we keep probing), negative that we
// lose, zero that the sets are identical.
func compareProbes(ours, theirs []record) int {
	sortRecs := func(in []record) []record {
		out := slices.Clone(in)
		slices.SortFunc(out, func(a, b record) int {
			if a.Type != b.Type {
				return int(a.Type) - int(b.Type)
			}
			return bytes.Compare(a.rdata(), b.rdata())
		})
		return out
	}
	a, b := sortRecs(ours), sortRecs(theirs)
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i].Type != b[i].Type {
			return int(a[i].Type) - int(b[i].Type)
		}
		if c := bytes.Compare(a[i].rdata(), b[i].rdata()); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// equalName compares two DNS names as mDNS does (ASCII case-insensitive, trailing dot
// optional).
func equalName(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// firstLabel splits a name into its first label and the rest (without the separating dot).
func firstLabel(name string) (string, string) {
	first, rest, _ := strings.Cut(name, ".")
	return first, rest
}
