//go:build !wasip1

package sdk

import (
	"errors"
	"fmt"
	"testing"

	"devhost/abi"
)

func TestAdvertiseService(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapMDNS)
	logger := MDNSService{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"txtvers=1"}}
	if err := AdvertiseService(logger); err != nil {
		t.Fatal(err)
	}
	// Advertising the same name again replaces it.
	logger.TXT = []string{"txtvers=2"}
	if err := AdvertiseService(logger); err != nil {
		t.Fatal(err)
	}
	if len(h.Services) != 1 || h.Services[0].TXT[0] != "txtvers=2" || h.Services[0].Port != 10110 {
		t.Fatalf("services %+v", h.Services)
	}
	for _, c := range []struct {
		name string
		s    MDNSService
		want error
	}{
		{"port 0", MDNSService{Type: "_a", Proto: "_tcp"}, ErrInvalid},
		{"port 65536", MDNSService{Type: "_a", Proto: "_tcp", Port: 65536}, ErrInvalid},
		{"proto", MDNSService{Type: "_a", Proto: "tcp", Port: 1}, ErrInvalid},
		{"9 TXT items", MDNSService{Type: "_a", Proto: "_tcp", Port: 1, TXT: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}}, ErrLimit},
	} {
		if err := AdvertiseService(c.s); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Six slots in all.
	for i := 2; i <= abi.MaxMDNSServices; i++ {
		if err := AdvertiseService(MDNSService{Instance: fmt.Sprint("s", i), Type: "_a", Proto: "_tcp", Port: i}); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	if err := AdvertiseService(MDNSService{Instance: "seventh", Type: "_a", Proto: "_tcp", Port: 7}); !errors.Is(err, ErrLimit) {
		t.Fatalf("seventh service: %v", err)
	}
	if err := WithdrawService("logger", "_nmea-0183", "_udp"); err != nil {
		t.Fatal(err)
	}
	if err := WithdrawService("logger", "_nmea-0183", "_udp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second withdrawal: %v", err)
	}
	if len(h.Services) != abi.MaxMDNSServices-1 {
		t.Fatalf("%d services after the withdrawal", len(h.Services))
	}
	h.NoMDNS = true
	if err := AdvertiseService(logger); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("without mDNS: %v", err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}
	if h.Services != nil {
		t.Fatalf("services outlived the instance: %+v", h.Services)
	}
}
