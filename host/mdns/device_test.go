package mdns

import (
	"reflect"
	"testing"
)

// The spec's "mDNS records" table, row by row.
func TestDeviceServices(t *testing.T) {
	info := DeviceInfo{Port: 8080, Version: "1.2.3", App: "devhost", Platform: "go1.26", Target: "esp32s3", ID: "1a2b"}
	got := DeviceServices(info)
	want := []struct {
		typ string
		txt map[string]string
	}{
		{"_http", map[string]string{"path": "/"}},
		{"_dev", map[string]string{"v": "1.2.3", "app": "devhost", "dev": "go1.26", "target": "esp32s3", "id": "1a2b", "api": "/api/v1", "auth": "0"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d services, want %d", len(got), len(want))
	}
	for i, w := range want {
		s := got[i]
		if s.Type != w.typ || s.Proto != "_tcp" || s.Port != 8080 || s.Instance != "" {
			t.Errorf("service %d: %+v", i, s)
		}
		if !reflect.DeepEqual(ParseTXT(s.TXT), w.txt) {
			t.Errorf("%s TXT %v, want %v", s.Type, ParseTXT(s.TXT), w.txt)
		}
		if err := s.validate(); err != nil {
			t.Errorf("%s: %v", s.Type, err)
		}
	}

	h := newHarness(t, 1)
	if err := h.r.Advertise(info); err != nil {
		t.Fatal(err)
	}
	// The device's own services take no application slot.
	if err := h.r.RegisterApp(Service{Instance: "app", Type: "_x", Proto: "_udp", Port: 1}); err != nil {
		t.Fatalf("the one application slot: %v", err)
	}
	if err := h.r.Advertise(info); err == nil {
		t.Fatal("advertising twice succeeded")
	}
}
