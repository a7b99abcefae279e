package plugin

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"devhost/abi"
)

// fakePeripheral is the board's GATT server role: it keeps the service the plugin serves so
// the test plays the central through its callbacks.
type fakePeripheral struct {
	mu      sync.Mutex
	svc     *PeripheralService
	served  int // Serve calls
	scanRsp []byte
	notes   []string
}

func (f *fakePeripheral) Serve(svc *PeripheralService) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.svc = svc
	f.served++
	return nil
}

func (f *fakePeripheral) Notify(char int, v []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, string(v))
	return 1, nil
}

func (f *fakePeripheral) ScanResponse(d []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scanRsp = append([]byte(nil), d...)
	return nil
}

func (f *fakePeripheral) service() *PeripheralService {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.svc
}

// fakeWiFi is the station manager's provisioning side.
type fakeWiFi struct {
	mu       sync.Mutex
	creds    []abi.WiFiCredentials
	held     map[string]bool
	watchers map[int]func(abi.WiFiStatus)
	next     int
}

func (f *fakeWiFi) Provision(ssid, psk string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creds = append(f.creds, abi.WiFiCredentials{SSID: ssid, Passphrase: psk})
	return nil
}

func (f *fakeWiFi) Status() abi.WiFiStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return abi.WiFiStatus{Configured: len(f.creds) > 0, State: "connecting", MAC: "02:00:00:0a:0b:0c"}
}

func (f *fakeWiFi) Watch(fn func(abi.WiFiStatus)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	n := f.next
	f.watchers[n] = fn
	return func() { f.mu.Lock(); delete(f.watchers, n); f.mu.Unlock() }
}

func (f *fakeWiFi) tell(st abi.WiFiStatus) int {
	f.mu.Lock()
	fns := make([]func(abi.WiFiStatus), 0, len(f.watchers))
	for _, fn := range f.watchers {
		fns = append(fns, fn)
	}
	f.mu.Unlock()
	for _, fn := range fns {
		fn(st)
	}
	return len(fns)
}

func (f *fakeWiFi) Scan() ([]abi.WiFiAP, error) {
	return []abi.WiFiAP{{SSID: "boat", BSSID: "02:11:22:33:44:55", Channel: 6, RSSI: -40, Auth: "wpa2"}}, nil
}

func (f *fakeWiFi) HoldPortal(id string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if on {
		f.held[id] = true
	} else {
		delete(f.held, id)
	}
}

func (f *fakeWiFi) holding(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[id]
}

// fakeButton is the provisioning button.
type fakeButton struct {
	mu sync.Mutex
	fn func(int)
}

func (f *fakeButton) Watch(fn func(int)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
	return func() { f.mu.Lock(); f.fn = nil; f.mu.Unlock() }
}

func (f *fakeButton) press(s int) bool {
	f.mu.Lock()
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		fn(s)
	}
	return fn != nil
}

var periphCaps = []abi.Capability{abi.CapLog, abi.CapPeripheral, abi.CapPortal, abi.CapWiFiProv, abi.CapProvPoP, abi.CapButton}

func periphHarness(t *testing.T) (*harness, *fakePeripheral, *fakeWiFi, *fakeButton) {
	fp, fw, fb := &fakePeripheral{}, &fakeWiFi{held: map[string]bool{}, watchers: map[int]func(abi.WiFiStatus){}}, &fakeButton{}
	h := newHarness(t, func(o *Options) {
		o.Peripheral, o.WiFi, o.Button = fp, fw, fb
		o.PoP = func() (string, error) { return "abcd1234", nil }
	})
	h.run()
	return h, fp, fw, fb
}

func periphManifest() abi.Manifest {
	m := manifest("periph", periphCaps...)
	m.ABIMinor = 2
	return m
}

// portal sends one request to the portal root through the manager.
func portal(m *Manager, method, path, body, cookie string) (*httptest.ResponseRecorder, bool) {
	r := httptest.NewRequest(method, "http://192.168.4.1"+path, strings.NewReader(body))
	r.RemoteAddr = "192.168.4.2:50000"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != "" {
		r.Header.Set("Cookie", cookie)
	}
	w := httptest.NewRecorder()
	return w, m.ServePortal(w, r)
}

// TestPeripheralRole: a plugin serves a GATT service, answers reads and writes (its ATT
// errors reach the central), notifies, serves a portal-root path with the connection and
// cookie, hands credentials to the station, follows its state and the button, reads the PoP;
// everything it held is released when it stops.
func TestPeripheralRole(t *testing.T) {
	h, fp, fw, fb := periphHarness(t)
	h.install(pack(t, periphManifest(), loadKey(t, "publisher")), nil)
	h.waitState("periph", StateRunning)
	for _, line := range []string{"gatt_serve rc=0", "ble_scan_response rc=0", "portal_serve rc=0", "wifi_watch rc=0",
		"button_watch rc=0", "portal_hold rc=0", "wifi_provision rc=0", "wifi_provision short rc=-2",
		"wifi_status connecting configured=true mac=02:00:00:0a:0b:0c", "wifi_scan boat wpa2", "prov_pop abcd1234"} {
		if !h.logs.has(line) {
			t.Errorf("no log line %q in %q", line, h.logs.lines)
		}
	}
	svc := fp.service()
	if svc == nil || svc.UUID != "021a9004-0382-4aea-bff4-6b3f1c5adfb4" || len(svc.Chars) != 2 || svc.Chars[0].Description != "prov-session" {
		t.Fatalf("service %+v", svc)
	}
	if string(fp.scanRsp) != "\x05\x09PROV" || len(fw.creds) != 1 || fw.creds[0].SSID != "boat" || !fw.holding("periph") {
		t.Errorf("scan response %q, credentials %+v, portal held %v", fp.scanRsp, fw.creds, fw.holding("periph"))
	}

	svc.Connected(1)
	svc.MTU(1, 185)
	waitFor(t, "the connection and MTU events", func() bool { return h.logs.has("gatt op=2 conn=1 mtu=185") })
	if err := svc.Write(1, 0, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Read(1, 0); err != nil || string(v) != "cba" {
		t.Errorf("read %q, %v", v, err)
	}
	var att ATTError
	if _, err := svc.Read(2, 0); !errors.As(err, &att) || att != 0x0e {
		t.Errorf("read before a write: %v", err)
	}
	if err := svc.Write(1, 0, []byte("refuse")); !errors.As(err, &att) || att != 0x80 {
		t.Errorf("refused write: %v", err)
	}
	if err := svc.Write(1, 0, make([]byte, abi.MaxGATTValue+1)); !errors.As(err, &att) || att != 0x0d {
		t.Errorf("oversized write: %v", err)
	}
	if err := svc.Write(1, 0, []byte("notify")); err != nil || !h.logs.has("gatt_notify rc=1") {
		t.Errorf("notify: %v", err)
	}

	w, ok := portal(h.m, http.MethodPost, "/prov-session", "xyz", "")
	if !ok || w.Code != 200 || w.Body.String() != "zyx" || w.Header().Get("Set-Cookie") != "session=192.168.4.2:50000; Path=/" ||
		w.Header().Get("Content-Type") != "application/octet-stream" {
		t.Errorf("portal: served %v, %d %q %v", ok, w.Code, w.Body, w.Header())
	}
	if w, _ := portal(h.m, http.MethodPost, "/prov-session", "xyz", "session=1"); w.Header().Get("Set-Cookie") != "" {
		t.Error("a cookie set again")
	}
	if w, _ := portal(h.m, http.MethodPost, "/prov-session", "ignore", ""); w.Code != 500 {
		t.Errorf("unanswered: %d", w.Code)
	}
	if w, _ := portal(h.m, http.MethodGet, "/prov-session", "", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", w.Code)
	}
	if _, ok := portal(h.m, http.MethodPost, "/prov-config", "x", ""); ok {
		t.Error("a path the plugin does not serve was served")
	}

	fw.tell(abi.WiFiStatus{State: "backoff", Reason: 202, Failure: "auth"})
	waitFor(t, "the station's failure", func() bool { return h.logs.has("wifi backoff failure=auth") })
	fw.tell(abi.WiFiStatus{State: "connected", Configured: true})
	waitFor(t, "the portal hold released", func() bool { return !fw.holding("periph") })
	fb.press(30)
	waitFor(t, "the button press", func() bool { return h.logs.has("button 30") })

	h.do(http.MethodPost, "/plugins/periph/stop", nil)
	h.waitState("periph", StateStopped)
	if fp.service() != nil || fw.tell(abi.WiFiStatus{}) != 0 || fb.press(1) {
		t.Error("the GATT service, the WiFi watch or the button watch outlived the instance")
	}
	if _, ok := portal(h.m, http.MethodPost, "/prov-session", "x", ""); ok {
		t.Error("the portal path outlived the instance")
	}
}

// TestPeripheralDenied: without the minor-2 capabilities every new function answers
// permission denied and nothing reaches the device.
func TestPeripheralDenied(t *testing.T) {
	h, fp, fw, _ := periphHarness(t)
	h.install(pack(t, periphManifest(), loadKey(t, "publisher")), []abi.Capability{abi.CapLog})
	h.waitState("periph", StateRunning)
	for _, fn := range []string{"gatt_serve", "ble_scan_response", "portal_serve", "wifi_watch", "button_watch",
		"portal_hold", "wifi_provision"} {
		if !h.logs.has(fn + " rc=-1") {
			t.Errorf("%s not denied", fn)
		}
	}
	if fp.service() != nil || len(fw.creds) != 0 || fw.holding("periph") || h.logs.has("prov_pop") {
		t.Error("a denied call had an effect")
	}
}
