package wifi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"devhost/host/board"
	"devhost/host/testio"
)

func (e *env) call(method, path string) (int, map[string]any) {
	e.t.Helper()
	for _, rt := range e.mg.Routes() {
		if rt.Method == method && rt.Path == path {
			w := httptest.NewRecorder()
			rt.Handler(w, httptest.NewRequest(method, path, nil))
			var m map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
				e.t.Fatalf("%s %s: %v: %s", method, path, err, w.Body.String())
			}
			return w.Code, m
		}
	}
	e.t.Fatalf("no route %s %s", method, path)
	return 0, nil
}

// TestStatusFieldsByState checks that each optional member is present exactly in the states
// the spec names.
func TestStatusFieldsByState(t *testing.T) {
	always := []string{"state", "sta_enabled", "hostname", "network_index", "reason", "attempt", "round",
		"connect_count", "disconnect_count", "portal"}
	fromObtaining := []string{"ssid", "bssid", "channel", "rssi"}
	connectedOnly := []string{"ip", "netmask", "gateway", "connected_s"}
	e := newEnv(t, nil, marina, board.APUpdate{SSID: "NoIP", PSK: "password1"})
	if err := e.sim.SetFault("NoIP", board.FaultNoIP); err != nil {
		t.Fatal(err)
	}
	check := func(state string, want ...[]string) map[string]any {
		t.Helper()
		_, m := e.call(http.MethodGet, "/wifi/status")
		if m["state"] != state {
			t.Fatalf("state %v, want %s", m["state"], state)
		}
		present := slices.Concat(append([][]string{always}, want...)...)
		for _, k := range present {
			if _, ok := m[k]; !ok {
				t.Fatalf("%s: %s missing from %v", state, k, m)
			}
		}
		for _, k := range slices.Concat(fromObtaining, connectedOnly, []string{"backoff_ms"}) {
			if _, ok := m[k]; ok && !slices.Contains(present, k) {
				t.Fatalf("%s: %s present in %v", state, k, m)
			}
		}
		return m
	}
	e.waitState("unconfigured", StateUnconfigured, -1)
	e.waitPortal("portal", true)
	m := check(StateUnconfigured)
	portal := m["portal"].(map[string]any)
	if portal["active"] != true || portal["ssid"] != "dev-abcd" || portal["ip"] != "127.4.171.205" || portal["clients"] != 0.0 {
		t.Fatalf("portal %v", portal)
	}
	if r := m["reason"].(map[string]any); r["code"] != 0.0 || r["text"] != "" {
		t.Fatalf("reason before any %v", r)
	}

	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "NoIP", PSK: "password1"}) })
	e.waitState("obtaining_ip", StateObtainingIP, 0)
	check(StateObtainingIP, fromObtaining)
	e.clk.Advance(30 * time.Second)
	e.waitState("backoff", StateBackoff, 0)
	m = check(StateBackoff, []string{"backoff_ms"})
	if r := m["reason"].(map[string]any); r["code"] != 1001.0 || m["backoff_ms"] != 1000.0 {
		t.Fatalf("backoff %v", m)
	}
	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}) })
	e.waitState("connected", StateConnected, 0)
	e.waitPortal("portal down", false)
	m = check(StateConnected, fromObtaining, connectedOnly)
	if p := m["portal"].(map[string]any); p["active"] != false || p["ssid"] != "dev-abcd" || len(p) != 2 {
		t.Fatalf("portal while down %v", p)
	}
	e.set(func(s *Settings) { s.StaEnabled = false })
	e.waitState("disabled", StateDisabled, -1)
	check(StateDisabled)
}

func TestScanEndpoints(t *testing.T) {
	e := newEnv(t, nil, marina, fuel)
	code, m := e.call(http.MethodGet, "/wifi/scan")
	if code != 200 || m["scanning"] != false || m["age_s"] != nil || len(m["results"].([]any)) != 0 {
		t.Fatalf("before the first scan: %d %v", code, m)
	}
	if _, ok := m["age_s"]; !ok {
		t.Fatal("age_s must be present (null) before the first scan")
	}
	code, m = e.call(http.MethodPost, "/wifi/scan")
	if code != 202 || m["status"] != "scanning" {
		t.Fatalf("POST /wifi/scan: %d %v", code, m)
	}
	e.mu.Lock()
	scans := e.events["wifi_scan"]
	e.mu.Unlock()
	if scans != 1 {
		t.Fatalf("%d wifi_scan events after one scan", scans)
	}
	e.clk.Advance(5 * time.Second)
	_, m = e.call(http.MethodGet, "/wifi/scan")
	res := m["results"].([]any)
	first := res[0].(map[string]any)
	if m["age_s"] != 5.0 || len(res) != 2 || first["ssid"] != "Marina" || first["rssi"] != -60.0 || first["auth"] != "wpa2" ||
		first["channel"] != 6.0 || first["bssid"] != board.DefaultBSSID("Marina") {
		t.Fatalf("cached scan %v", m)
	}
	// The radio cannot scan now: 409 busy, the cache stays.
	e.sim.SetScanBusy(true)
	code, m = e.call(http.MethodPost, "/wifi/scan")
	if code != 409 || m["error"] != "busy" {
		t.Fatalf("busy scan: %d %v", code, m)
	}
	if _, m = e.call(http.MethodGet, "/wifi/scan"); len(m["results"].([]any)) != 2 || m["scanning"] != false {
		t.Fatalf("cache after a busy scan %v", m)
	}
}

func TestWifiEventsOnChangeOnly(t *testing.T) {
	e := newEnv(t, nil, marina)
	e.waitPortal("unconfigured", true)
	count := func() int { e.mu.Lock(); defer e.mu.Unlock(); return e.events["wifi"] }
	n := count()
	// A change that moves nothing the status shows is no event.
	e.mu.Lock()
	reads := e.reads
	e.mu.Unlock()
	e.set(func(s *Settings) { s.BackoffMax = time.Minute })
	testio.Eventually(t, hangGuard, func() bool { // the change is read
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.reads > reads
	})
	e.wait("step finished", func(s Status) bool { return s.State == StateUnconfigured })
	if c := count(); c != n {
		t.Fatalf("%d wifi events after a change the status does not show", c-n)
	}
	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}) })
	e.waitState("connected", StateConnected, 0)
	e.waitPortal("down", false)
	testio.Eventually(t, hangGuard, func() bool { return count() > n }) // a wifi event on the way to connected
	if name, st := e.mg.OnConnect(); name != "wifi" || st.(Status).State != StateConnected {
		t.Fatalf("snapshot %s %+v", name, st)
	}
}
