package mdns

import (
	"errors"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/net/dns/dnsmessage"
)

func sampleResponse() message {
	return message{
		Response: true,
		Answers: []record{
			{Name: "_dev._tcp.local.", Type: dnsmessage.TypePTR, TTL: 4500, Target: "dev._dev._tcp.local."},
		},
		Additionals: []record{
			{Name: "dev._dev._tcp.local.", Type: dnsmessage.TypeSRV, Flush: true, TTL: 120, Port: 80, Target: "dev.local."},
			{Name: "dev._dev._tcp.local.", Type: dnsmessage.TypeTXT, Flush: true, TTL: 4500, Text: []string{"v=1.0", "api=/api/v1", "auth=0"}},
			{Name: "dev.local.", Type: dnsmessage.TypeA, Flush: true, TTL: 120, Addr: netip.MustParseAddr("10.0.0.1")},
			{Name: "dev.local.", Type: dnsmessage.TypeAAAA, Flush: true, TTL: 120, Addr: netip.MustParseAddr("fe80::1")},
		},
	}
}

func TestPackParseRoundTrip(t *testing.T) {
	cases := map[string]message{
		"response": sampleResponse(),
		"probe": {
			Questions:   []question{{Name: "dev.local.", Type: dnsmessage.TypeALL, QU: true}},
			Authorities: []record{{Name: "dev.local.", Type: dnsmessage.TypeA, Flush: true, TTL: 120, Addr: netip.MustParseAddr("10.0.0.1")}},
		},
		"legacy answer": {
			ID: 4711, Response: true,
			Questions: []question{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR}},
			Answers:   []record{{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: 10, Target: "x._http._tcp.local."}},
		},
		"empty txt": {
			Response: true,
			Answers:  []record{{Name: "x._http._tcp.local.", Type: dnsmessage.TypeTXT, TTL: 1, Text: []string{""}}},
		},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := in.pack()
			if err != nil {
				t.Fatal(err)
			}
			out, err := parseMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip:\n in  %+v\n out %+v", in, out)
			}
		})
	}
}

func TestParseSkipsForeignRecordsAndRejectsGarbage(t *testing.T) {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{Response: true})
	_ = b.StartAnswers()
	name := dnsmessage.MustNewName("dev.local.")
	_ = b.CNAMEResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: 5}, dnsmessage.CNAMEResource{CNAME: name})
	_ = b.AResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassCHAOS, TTL: 5}, dnsmessage.AResource{A: [4]byte{1, 2, 3, 4}})
	_ = b.AResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET | classFlush, TTL: 5}, dnsmessage.AResource{A: [4]byte{10, 0, 0, 1}})
	pkt, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMessage(pkt)
	if err != nil {
		t.Fatal(err)
	}
	want := []record{{Name: "dev.local.", Type: dnsmessage.TypeA, Flush: true, TTL: 5, Addr: netip.MustParseAddr("10.0.0.1")}}
	if !reflect.DeepEqual(m.Answers, want) {
		t.Fatalf("answers = %+v, want only the IN A record", m.Answers)
	}

	resp := sampleResponse()
	good, _ := resp.pack()
	for name, pkt := range map[string][]byte{
		"empty":     nil,
		"short":     good[:7],
		"truncated": good[:len(good)-3],
		"bad count": append([]byte{0, 0, 0x84, 0, 0, 0, 0, 9, 0, 0, 0, 0}, good[12:]...),
	} {
		if _, err := parseMessage(pkt); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	opcode := append([]byte(nil), good...)
	opcode[2] |= 0x08 // opcode 1
	if _, err := parseMessage(opcode); !errors.Is(err, errIgnored) {
		t.Errorf("non-zero opcode: err = %v, want ignored", err)
	}
}

func TestParseCapsRecordsPerMessage(t *testing.T) {
	m := message{Response: true}
	for i := 0; i < maxRecordsPerMessage+50; i++ {
		m.Answers = append(m.Answers, record{Name: "a.local.", Type: dnsmessage.TypeA, TTL: 1, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})})
	}
	b, err := m.pack()
	if err != nil {
		t.Fatal(err)
	}
	out, err := parseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Answers) != maxRecordsPerMessage {
		t.Fatalf("kept %d records, want %d", len(out.Answers), maxRecordsPerMessage)
	}
}

func TestCompareProbes(t *testing.T) {
	a := func(ip string) record {
		return record{Name: "dev.local.", Type: dnsmessage.TypeA, Addr: netip.MustParseAddr(ip)}
	}
	srv := record{Name: "x._http._tcp.local.", Type: dnsmessage.TypeSRV, Port: 80, Target: "dev.local."}
	cases := []struct {
		name         string
		ours, theirs []record
		wantSign     int
	}{
		{"identical", []record{a("10.0.0.1")}, []record{a("10.0.0.1")}, 0},
		{"ours later", []record{a("10.0.0.2")}, []record{a("10.0.0.1")}, 1},
		{"ours earlier", []record{a("10.0.0.1")}, []record{a("10.0.0.2")}, -1},
		{"order does not matter", []record{a("10.0.0.2"), a("10.0.0.1")}, []record{a("10.0.0.1"), a("10.0.0.2")}, 0},
		{"longer set wins", []record{a("10.0.0.1"), a("10.0.0.3")}, []record{a("10.0.0.1")}, 1},
		{"type decides before data", []record{srv}, []record{a("255.255.255.255")}, 1}, // SRV (33) > A (1)
	}
	for _, c := range cases {
		got := compareProbes(c.ours, c.theirs)
		if sign(got) != c.wantSign {
			t.Errorf("%s: compare = %d, want sign %d", c.name, got, c.wantSign)
		}
	}
}

func sign(n int) int {
	switch {
	case n > 0:
		return 1
	case n < 0:
		return -1
	}
	return 0
}

func TestRenamed(t *testing.T) {
	cases := []struct {
		base string
		n    int
		host bool
		want string
	}{
		{"web", 1, false, "web"},
		{"web", 2, false, "web (2)"},
		{"web", 13, false, "web (13)"},
		{"dev-1a2b", 2, true, "dev-1a2b-2"},
		{strings.Repeat("h", 63), 2, true, strings.Repeat("h", 61) + "-2"},
		{strings.Repeat("é", 31) + "x", 2, false, strings.Repeat("é", 29) + " (2)"}, // 63 bytes, cut on a rune
		{"ab-" + strings.Repeat("c", 58) + "-d", 3, true, "ab-" + strings.Repeat("c", 58) + "-3"},
	}
	for _, c := range cases {
		got := renamed(c.base, c.n, c.host)
		if got != c.want {
			t.Errorf("renamed(%q, %d) = %q, want %q", c.base, c.n, got, c.want)
		}
		if len(got) > 63 {
			t.Errorf("renamed(%q, %d) is %d bytes", c.base, c.n, len(got))
		}
	}
}

func TestParseTXT(t *testing.T) {
	got := ParseTXT([]string{"Self=urn:a", "roles=master, main", "self=urn:b", "flag", "", "=x", "empty="})
	want := map[string]string{"self": "urn:a", "roles": "master, main", "flag": "", "empty": ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseTXT = %v, want %v", got, want)
	}
}

func TestServiceLimits(t *testing.T) {
	ok := Service{Type: "_http", Proto: "_tcp", Port: 80, TXT: []string{"path=/"}}
	items := func(n, size int) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, string(rune('a'+i))+"="+strings.Repeat("v", size-2))
		}
		return out
	}
	cases := []struct {
		name string
		mod  func(*Service)
		ok   bool
	}{
		{"valid", func(*Service) {}, true},
		{"type of 31 characters", func(s *Service) { s.Type = "_" + strings.Repeat("a", 30) }, true},
		{"type of 32 characters", func(s *Service) { s.Type = "_" + strings.Repeat("a", 31) }, false},
		{"type without underscore", func(s *Service) { s.Type = "http" }, false},
		{"type only underscore", func(s *Service) { s.Type = "_" }, false},
		{"type with dot", func(s *Service) { s.Type = "_a.b" }, false},
		{"proto _udp", func(s *Service) { s.Proto = "_udp" }, true},
		{"proto _sctp", func(s *Service) { s.Proto = "_sctp" }, false},
		{"port 0", func(s *Service) { s.Port = 0 }, false},
		{"port 65536", func(s *Service) { s.Port = 65536 }, false},
		{"8 items of 32 bytes (256)", func(s *Service) { s.TXT = items(8, 32) }, true},
		{"9 items", func(s *Service) { s.TXT = items(9, 3) }, false},
		{"257 bytes", func(s *Service) { s.TXT = append(items(7, 32), "h="+strings.Repeat("v", 31)) }, false},
		{"one item of 256 bytes", func(s *Service) { s.TXT = items(1, 256) }, false},
		{"empty key", func(s *Service) { s.TXT = []string{"=v"} }, false},
		{"duplicate key", func(s *Service) { s.TXT = []string{"a=1", "A=2"} }, false},
		{"bare key", func(s *Service) { s.TXT = []string{"flag"} }, true},
		{"key not ASCII", func(s *Service) { s.TXT = []string{"ké=1"} }, false},
		{"instance 63 bytes", func(s *Service) { s.Instance = strings.Repeat("i", 63) }, true},
		{"instance 64 bytes", func(s *Service) { s.Instance = strings.Repeat("i", 64) }, false},
		{"instance with dot", func(s *Service) { s.Instance = "a.b" }, false},
		{"instance with control", func(s *Service) { s.Instance = "a\tb" }, false},
		{"instance UTF-8", func(s *Service) { s.Instance = "Bätsman's web" }, true},
	}
	for _, c := range cases {
		s := ok
		c.mod(&s)
		err := s.validate()
		if c.ok && err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", c.name, err)
		}
	}
}

func TestValidHostname(t *testing.T) {
	for h, ok := range map[string]bool{
		"dev-1a2b": true, "a": true, strings.Repeat("a", 63): true,
		"": false, strings.Repeat("a", 64): false, "-a": false, "a-": false, "a_b": false, "a.b": false,
	} {
		if err := ValidHostname(h); (err == nil) != ok {
			t.Errorf("ValidHostname(%q) = %v", h, err)
		}
	}
}

// FuzzParseMessage feeds arbitrary packets to the parser: it must never panic, and whatever it
// accepts must build again and read back the same.
func FuzzParseMessage(f *testing.F) {
	for _, m := range []message{sampleResponse(), {Questions: []question{{Name: "_signalk-http._tcp.local.", Type: dnsmessage.TypePTR}}}} {
		b, err := m.pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0xc0, 0x0c})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			return
		}
		again, err := m.pack()
		if err != nil {
			// Parsed names can be longer than a builder accepts only if the packet lied; a
			// record the parser returns must always be buildable.
			t.Fatalf("parsed message does not build: %v\n%+v", err, m)
		}
		m2, err := parseMessage(again)
		if err != nil {
			t.Fatalf("rebuilt message does not parse: %v", err)
		}
		if !reflect.DeepEqual(normalize(m), normalize(m2)) {
			t.Fatalf("round trip differs:\n %+v\n %+v", m, m2)
		}
	})
}

// normalize maps the forms that build to the same bytes onto one: an empty TXT record is one
// empty string, and the ID and flags of a query are not kept apart from Response.
func normalize(m message) message {
	fix := func(rs []record) []record {
		out := make([]record, len(rs))
		for i, r := range rs {
			if r.Type == dnsmessage.TypeTXT && len(r.Text) == 0 {
				r.Text = []string{""}
			}
			out[i] = r
		}
		return out
	}
	m.Answers, m.Authorities, m.Additionals = fix(m.Answers), fix(m.Authorities), fix(m.Additionals)
	return m
}

// discardLink is a link that drops what is sent, for fuzzing the receive paths.
type discardLink struct{ fakeLink }

func (l *discardLink) Send([]byte, int, *net.UDPAddr) {}

// FuzzReceive feeds arbitrary packets to an announced responder (answers, conflicts,
// tie-breaks) and to a browse: neither may panic, and the browse cache stays bounded.
func FuzzReceive(f *testing.F) {
	resp := sampleResponse()
	for _, m := range []message{resp, {Questions: []question{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeALL}},
		Authorities: []record{{Name: "dev._http._tcp.local.", Type: dnsmessage.TypeSRV, TTL: 1, Port: 1, Target: "x.local."}}}} {
		b, err := m.pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(mdnsPort))
	}
	f.Fuzz(func(t *testing.T, b []byte, port uint16) {
		r, err := New(Config{Hostname: "dev", Clock: clockwork.NewFakeClock()})
		if err != nil {
			t.Fatal(err)
		}
		l := &discardLink{fakeLink{closed: make(chan struct{})}}
		r.link = l
		r.host.state = stateAnnounced
		r.services = []*entry{{key: keyOf("", "_http", "_tcp"), base: "dev", n: 1, state: stateAnnounced,
			svc: Service{Instance: "dev", Type: "_http", Proto: "_tcp", Port: 80, TXT: []string{"path=/"}}}}
		r.handle(l, b, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 7), Port: int(port)}, testIface.Index)
		if m, err := parseMessage(b); err == nil {
			st := newBrowseState("_http._tcp", t0)
			st.receive(t0, &m)
			st.due(t0.Add(time.Hour))
			if len(st.cache) > maxCached {
				t.Fatalf("cache holds %d records", len(st.cache))
			}
		}
		r.mu.Lock()
		for _, e := range r.all() {
			r.stop(e)
		}
		r.mu.Unlock()
	})
}
