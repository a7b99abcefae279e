//go:build !wasip1

package sdk

import (
	"errors"
	"testing"

	"devhost/abi"
)

// TestPeriphFakeHost: the minor-2 wrappers against the fake host: answers, refusals and
// the denial of every function without its capability.
func TestPeriphFakeHost(t *testing.T) {
	caps := []abi.Capability{abi.CapPeripheral, abi.CapPortal, abi.CapWiFiProv, abi.CapProvPoP, abi.CapButton}
	h := &FakeHost{Manifest: abi.Manifest{ID: "demo", Name: "Demo", Version: "1.0.0", ABI: 1, ABIMinor: 2, Capabilities: caps}}
	h.APs = []abi.WiFiAP{{SSID: "boat", Auth: "wpa2", RSSI: -40}}
	var pressed int
	if err := h.Start(&Plugin{OnButton: func(s int) { pressed = s }}); err != nil {
		t.Fatal(err)
	}
	if _, err := GATTNotify(0, []byte("x")); !errors.Is(err, ErrState) {
		t.Errorf("notify without a service: %v", err)
	}
	if err := GATTServe(abi.GATTService{UUID: "bad"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad service: %v", err)
	}
	if err := BLEScanResponse(make([]byte, 32)); !errors.Is(err, ErrLimit) {
		t.Errorf("long scan response: %v", err)
	}
	if err := PortalServe("/api/v1/prov"); !errors.Is(err, ErrInvalid) {
		t.Errorf("foreign portal path: %v", err)
	}
	if err := WiFiProvision("boat", "short"); !errors.Is(err, ErrInvalid) {
		t.Errorf("short passphrase: %v", err)
	}
	if aps, err := WiFiScan(); err != nil || len(aps) != 1 || aps[0].SSID != "boat" {
		t.Errorf("scan %v, %v", aps, err)
	}
	if _, err := ProvPoP(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no PoP: %v", err)
	}
	if err := HoldPortal(true); err != nil || !h.PortalHeld {
		t.Errorf("hold: %v", err)
	}
	if err := ButtonWatch(true); err != nil {
		t.Fatal(err)
	}
	if err := h.Button(30); err != nil || pressed != 30 {
		t.Errorf("button: %d, %v", pressed, err)
	}
	if st, err := WiFiStatusNow(); err != nil || st.Configured {
		t.Errorf("status %+v, %v", st, err)
	}
	if err := h.Stop(); err != nil {
		t.Fatal(err)
	}

	denied := &FakeHost{Manifest: abi.Manifest{ID: "demo", Name: "Demo", Version: "1.0.0", ABI: 1, Capabilities: caps}, Granted: []abi.Capability{}}
	if err := denied.Start(&Plugin{}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = denied.Stop() }()
	for name, err := range map[string]error{
		"gatt":   GATTWithdraw(),
		"portal": PortalServe(),
		"wifi":   WiFiWatch(true),
		"hold":   HoldPortal(true),
		"button": ButtonWatch(true),
	} {
		if !errors.Is(err, ErrPermission) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ProvPoP(); !errors.Is(err, ErrPermission) {
		t.Errorf("pop: %v", err)
	}
}
