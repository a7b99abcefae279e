package abi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMDNSServiceRoundTrip(t *testing.T) {
	for _, s := range []MDNSService{
		{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"txtvers=1", "flag"}},
		{Type: "_http", Proto: "_tcp", Port: 0},
	} {
		got, err := DecodeMDNSService(AppendMDNSService(nil, s))
		if err != nil || !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip %+v: %+v, %v", s, got, err)
		}
	}
	b := AppendMDNSService(nil, MDNSService{Type: "_x", Proto: "_tcp", Port: 1, TXT: []string{"a=1"}})
	for n := 0; n < len(b); n++ {
		if _, err := DecodeMDNSService(b[:n]); err == nil {
			t.Fatalf("decoded %d of %d bytes", n, len(b))
		}
	}
	if _, err := DecodeMDNSService(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

// The spec's limits: refused, never truncated; over-long or too many TXT items are ErrLimit.
func TestMDNSServiceCheck(t *testing.T) {
	ok := MDNSService{Instance: "x", Type: "_app", Proto: "_tcp", Port: 80}
	withTXT := func(items ...string) MDNSService { s := ok; s.TXT = items; return s }
	eight := make([]string, 8)
	for i := range eight {
		eight[i] = string(rune('a'+i)) + "=" + strings.Repeat("v", 30) // 32 bytes each: 256 in all
	}
	for _, c := range []struct {
		name string
		s    MDNSService
		want error
	}{
		{"valid", ok, nil},
		{"withdraw needs no port", MDNSService{Type: "_app", Proto: "_udp"}, nil},
		{"type of 31 bytes", MDNSService{Type: "_" + strings.Repeat("t", 30), Proto: "_tcp", Port: 1}, nil},
		{"type of 32 bytes", MDNSService{Type: "_" + strings.Repeat("t", 31), Proto: "_tcp", Port: 1}, ErrInvalid},
		{"type without _", MDNSService{Type: "app", Proto: "_tcp", Port: 1}, ErrInvalid},
		{"type with a dot", MDNSService{Type: "_a.b", Proto: "_tcp", Port: 1}, ErrInvalid},
		{"proto", MDNSService{Type: "_app", Proto: "_sctp", Port: 1}, ErrInvalid},
		{"port", MDNSService{Type: "_app", Proto: "_tcp", Port: 65536}, ErrInvalid},
		{"instance with a dot", MDNSService{Instance: "a.b", Type: "_app", Proto: "_tcp", Port: 1}, ErrInvalid},
		{"instance of 64 bytes", MDNSService{Instance: strings.Repeat("i", 64), Type: "_app", Proto: "_tcp", Port: 1}, ErrInvalid},
		{"8 items, 256 bytes", withTXT(eight...), nil},
		{"9 items", withTXT(append(eight[:7:7], "h=1", "i=1")...), ErrLimit},
		{"257 bytes", withTXT(append(eight[:7:7], eight[7]+"v")...), ErrLimit},
		{"empty key", withTXT("=v"), ErrInvalid},
		{"repeated key", withTXT("a=1", "A=2"), ErrInvalid},
	} {
		err := c.s.Check()
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func FuzzMDNSService(f *testing.F) {
	f.Add(AppendMDNSService(nil, MDNSService{Instance: "i", Type: "_app", Proto: "_tcp", Port: 80, TXT: []string{"a=1"}}))
	f.Add(AppendMDNSService(nil, MDNSService{Type: "_app", Proto: "_udp"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeMDNSService(b)
		if err != nil {
			return
		}
		_ = s.Check()
		if again := AppendMDNSService(nil, s); string(again) != string(b) {
			t.Fatalf("re-encoded %x, decoded from %x", again, b)
		}
	})
}
