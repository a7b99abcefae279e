//go:build !wasip1

package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"devhost/abi"
	"devhost/plugins/ble/gattprov"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
	"devhost/sdk"
)

// start runs the plugin on a fake host of a device with no network configured.
func start(t *testing.T, configured bool) *sdk.FakeHost {
	t.Helper()
	m, err := sdk.ReadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	h := &sdk.FakeHost{Manifest: m}
	h.PoP = "abcd1234"
	h.WiFi = abi.WiFiStatus{Configured: configured, State: "unconfigured", MAC: "02:00:00:0a:0b:0c"}
	h.APs = []abi.WiFiAP{{SSID: "boat", BSSID: "02:11:22:33:44:55", Channel: 6, RSSI: -40, Auth: "wpa2"}}
	if err := h.Start(newPlugin().handlers()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	return h
}

func doc(t *testing.T, h *sdk.FakeHost, route string) map[string]any {
	t.Helper()
	r, err := h.HTTP("GET", route, "")
	if err != nil || r.Status != 200 {
		t.Fatalf("GET %s: %d %s %v", route, r.Status, r.Body, err)
	}
	var out map[string]any
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// gattExchange is the phone app over the fake host's GATT: write the request to the
// endpoint's characteristic, read the answer back.
func gattExchange(h *sdk.FakeHost, conn uint32) protocomm.Exchange {
	return func(ep string, body []byte) ([]byte, error) {
		char := uint32(slices.Index(protocomm.Endpoints, ep))
		if r, err := h.GATTEvent(abi.GATTEvent{Op: abi.GATTWrite, Conn: conn, Char: char, Value: body}); err != nil || r.ATT != 0 {
			return nil, fmt.Errorf("write %s: ATT %#x %v", ep, r.ATT, err)
		}
		r, err := h.GATTEvent(abi.GATTEvent{Op: abi.GATTRead, Conn: conn, Char: char})
		if err != nil || r.ATT != 0 {
			return nil, fmt.Errorf("read %s: ATT %#x %v", ep, r.ATT, err)
		}
		return r.Value, nil
	}
}

// portalExchange is the phone app over the setup portal, keeping the cookie.
func portalExchange(h *sdk.FakeHost, conn string) protocomm.Exchange {
	cookie := ""
	return func(ep string, body []byte) ([]byte, error) {
		r, err := h.Portal(abi.PortalRequest{Method: "POST", Path: "/" + ep, Conn: conn, Cookie: cookie, Body: body})
		if err != nil || r.Status != 200 {
			return nil, fmt.Errorf("%s: %d %s %v", ep, r.Status, r.Body, err)
		}
		if r.SetCookie != "" {
			cookie = r.SetCookie
		}
		return r.Body, nil
	}
}

// TestProvisionOverGATT: at boot with no network the plugin serves ESP-IDF's service and
// advertises it; a wrong PoP is refused with nothing stored; the app's session sends the
// credentials into slot 0, the portal is held, and the station's outcome reaches the app.
func TestProvisionOverGATT(t *testing.T) {
	h := start(t, false)
	if h.Dormant != nil {
		t.Fatalf("dormant while provisioning: %+v", h.Dormant)
	}
	if d := doc(t, h, "/prov"); d["active"] != true || d["scheme"] != "ble" || d["service_name"] != "PROV_0A0B0C" || d["pop"] != "abcd1234" {
		t.Fatalf("GET /prov: %v", d)
	}
	if h.GATT == nil || h.GATT.UUID != gattprov.ServiceUUID || len(h.GATT.Chars) != len(protocomm.Endpoints) ||
		h.GATT.Chars[2].Description != protocomm.Endpoints[2] {
		t.Fatalf("service %+v", h.GATT)
	}
	if string(h.Advertising) != string(gattprov.AdvertServiceData()) || string(h.ScanResponse) != "\x0c\x09PROV_0A0B0C" {
		t.Errorf("advertising %x, scan response %q", h.Advertising, h.ScanResponse)
	}

	bad := &provclient.Client{X: gattExchange(h, 1), Sec: protocomm.Sec1, PoP: []byte("wrong")}
	if err := bad.Handshake(); err == nil {
		t.Fatal("a wrong PoP was accepted")
	}
	if _, err := h.GATTEvent(abi.GATTEvent{Op: abi.GATTDisconnect, Conn: 1}); err != nil {
		t.Fatal(err)
	}

	c := &provclient.Client{X: gattExchange(h, 2), Sec: protocomm.Sec1, PoP: []byte("abcd1234")}
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	aps, err := c.Scan()
	if err != nil || len(aps) != 1 || string(aps[0].Ssid) != "boat" {
		t.Fatalf("scan %v, %v", aps, err)
	}
	if len(h.Credentials) != 0 {
		t.Fatal("credentials stored before the app sent them")
	}
	if err := c.SetConfig("boat", "password1"); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyConfig(); err != nil {
		t.Fatal(err)
	}
	if len(h.Credentials) != 1 || h.Credentials[0] != (abi.WiFiCredentials{SSID: "boat", Passphrase: "password1"}) || !h.PortalHeld {
		t.Fatalf("credentials %+v, portal held %v", h.Credentials, h.PortalHeld)
	}
	if err := h.WiFiChanged(abi.WiFiStatus{Configured: true, State: "connecting", SSID: "boat"}); err != nil {
		t.Fatal(err)
	}
	if err := h.WiFiChanged(abi.WiFiStatus{Configured: true, State: "backoff", Reason: 202, Failure: "auth"}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status()
	if err != nil || st.StaState != pb.WifiStationState_ConnectionFailed || st.GetFailReason() != pb.WifiConnectFailedReason_AuthError {
		t.Fatalf("status after a wrong passphrase: %v, %v", st, err)
	}
	if d := doc(t, h, "/prov"); d["got_credentials"] != true || d["active"] != true {
		t.Fatalf("GET /prov: %v", d)
	}
}

// TestProvisionOverPortal: prov_scheme softap moves provisioning to the portal paths (the
// GATT service and the advertisement withdrawn); the session follows the cookie.
func TestProvisionOverPortal(t *testing.T) {
	h := start(t, false)
	if err := h.SetConfig(map[string]any{"prov_scheme": "softap"}); err != nil {
		t.Fatal(err)
	}
	if h.GATT != nil || len(h.Advertising) != 0 || len(h.PortalPaths) != len(abi.PortalPaths) {
		t.Fatalf("after softap: service %v, advertising %x, portal %v", h.GATT, h.Advertising, h.PortalPaths)
	}
	if d := doc(t, h, "/ble/status"); d["prov"].(map[string]any)["scheme"] != "softap" {
		t.Fatalf("GET /ble/status: %v", d)
	}
	// The restart on the new scheme passes through no provisioning at all: no reason to
	// ask to sleep (the host would refuse, the station being unconfigured).
	for _, l := range h.Logs {
		if strings.Contains(l, "dormant") {
			t.Fatalf("while changing the scheme: %q", l)
		}
	}
	// Every exchange on a new connection: the cookie carries the session.
	n := 0
	cookie := portalExchange(h, "")
	x := func(ep string, body []byte) ([]byte, error) {
		n++
		return cookie(ep, body)
	}
	c := &provclient.Client{X: x, Sec: protocomm.Sec1, PoP: []byte("abcd1234")}
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConfig("boat", "password1"); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyConfig(); err != nil || len(h.Credentials) != 1 {
		t.Fatalf("apply %v, credentials %v", err, h.Credentials)
	}
	if r, _ := h.Portal(abi.PortalRequest{Method: "POST", Path: "/prov-config", Conn: "192.168.4.9:1", Body: []byte{1, 2, 3}}); r.Status != 400 {
		t.Errorf("garbage on a new session: %d", r.Status)
	}
	if r, _ := h.Portal(abi.PortalRequest{Method: "GET", Path: "/proto-ver", Conn: "192.168.4.9:1"}); r.Status != 405 {
		t.Errorf("GET: %d", r.Status)
	}
}

// TestGateway: f_ble.gateway scans; a configured BTHome sensor's advert is published, an
// unknown one listed undecoded; the status and the ble event say so.
func TestGateway(t *testing.T) {
	h := start(t, true)
	// Nothing to do with a network configured and the gateway off: dormant until the
	// gateway or prov changes, the button is pressed or the station loses its networks.
	want := sdk.Wake{Config: map[string]json.RawMessage{"gateway": json.RawMessage("false"), "prov": json.RawMessage("true")},
		Button: true, WiFiUnconfigured: true}
	if h.Dormant == nil || !h.Dormant.Equal(want) {
		t.Fatalf("dormant request: %+v", h.Dormant)
	}
	if d := doc(t, h, "/prov"); d["active"] != false {
		t.Fatalf("provisioning with a network configured: %v", d)
	}
	if err := h.SetConfig(map[string]any{"gateway": true,
		"sensors": `[{"address":"AA:BB:CC:DD:EE:01","kind":"bthome","key":"","prefix":"environment.cabin"}]`}); err != nil {
		t.Fatal(err)
	}
	if !h.Scanning || h.Dormant != nil {
		t.Fatalf("scanning %v, dormant %+v", h.Scanning, h.Dormant)
	}
	adv := []byte{0x02, 0x01, 0x06, 0x07, 0x16, 0xd2, 0xfc, 0x40, 0x02, 0xc4, 0x09}
	for _, addr := range []string{"11:22:33:44:55:66", "aa:bb:cc:dd:ee:01"} {
		if err := h.BLEAdvert(sdk.BLEAdvert{Addr: addr, RSSI: -65, Data: adv}); err != nil {
			t.Fatal(err)
		}
	}
	d := doc(t, h, "/ble/status")
	devs, _ := d["devices"].([]any)
	if d["scanning"] != true || len(devs) != 2 || devs[0].(map[string]any)["decoded"] != true || devs[1].(map[string]any)["decoded"] != false {
		t.Fatalf("GET /ble/status: %v", d)
	}
	var temp *abi.PathValue
	for i, v := range h.Published {
		if v.Path == "environment.cabin.temperature" {
			temp = &h.Published[i]
		}
	}
	if temp == nil || temp.Value.Num < 298.14 || temp.Value.Num > 298.16 {
		t.Fatalf("published %v", h.Published)
	}
	if last := h.SSE[len(h.SSE)-1]; last.Event != "ble" || !last.Retain {
		t.Errorf("ble event %+v", last)
	}
	if err := h.Button(600); err != nil {
		t.Fatal(err)
	}
	if d := doc(t, h, "/prov"); d["active"] != true {
		t.Fatalf("after a button press: %v", d)
	}
}
