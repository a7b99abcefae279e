package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// devctlBoard runs `devctl board --data DIR args...` against the device's board and answers
// its output.
func (d *dev) devctlBoard(args ...string) string {
	d.t.Helper()
	out, err := runTool(context.Background(), nil, devctl, append([]string{"board", "--data", filepath.Join(d.data, "flash")}, args...)...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

// waitWiFi polls GET /wifi/status until ok accepts it. The station's steps run on real
// timers in a race-built device: the bound is hangGuard, a guard, not a measure of them.
func (d *dev) waitWiFi(what string, ok func(map[string]any) bool) map[string]any {
	d.t.Helper()
	return d.waitDoc(what, "/api/v1/wifi/status", hangGuard, ok)
}

// TestWiFiJoinAndFailover is the installer's flow on the default board: an access point comes
// in range, network 0 is configured, the station joins and carries the default route; a fault
// on it moves the station to network 1.
func TestWiFiJoinAndFailover(t *testing.T) {
	boardFile := filepath.Join(t.TempDir(), "board.json")
	if err := os.WriteFile(boardFile, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDev(t, withArgs("--board", boardFile))
	evs := d.events()
	st := d.waitWiFi("a fresh device is unconfigured", func(m map[string]any) bool { return m["state"] == "unconfigured" })
	if _, ok := st["ssid"]; ok || st["network_index"] != -1.0 {
		t.Fatalf("unconfigured status %v", st)
	}
	if n := d.call("GET", "/api/v1/net/status", "").json(t); n["up"] != false {
		t.Fatalf("the default board has no network before WiFi: %v", n)
	}

	start := time.Now()
	d.devctlBoard("wifi", "ap", "add", "--ssid", "Pier", "--psk", "pier-pass-1", "--rssi", "-58", "--channel", "11")
	d.putConfig(`{"wifi":{"ssid0":"Pier","psk0":"pier-pass-1"}}`)
	st = d.waitWiFi("connected", func(m map[string]any) bool { return m["state"] == "connected" })
	t.Logf("wifi ap add, then PUT /config, to connected: %v", time.Since(start))
	// The route comes up (`net`) and the status says connected (`wifi`), in either order.
	var sawWiFi, sawNet bool
	waitEvent(t, evs, hangGuard, "wifi connected and net on the station", func(e event) bool {
		sawWiFi = sawWiFi || (e.name == "wifi" && strings.Contains(e.data, `"state":"connected"`))
		sawNet = sawNet || (e.name == "net" && strings.Contains(e.data, `"iface":"wifi_sta"`))
		return sawWiFi && sawNet
	})
	if st["ssid"] != "Pier" || st["channel"] != 11.0 || st["rssi"] != -58.0 || st["ip"] != "127.0.0.1" || st["network_index"] != 0.0 {
		t.Fatalf("connected status %v", st)
	}
	d.waitDoc("net status on the station", "/api/v1/net/status", hangGuard, func(n map[string]any) bool {
		return n["up"] == true && n["iface"] == "wifi_sta" && n["rssi"] == -58.0 && n["ip6_ll"] == "fe80::ff:fe12:abcd"
	})

	// Network 1 in range; a short DHCP timeout so the failover takes seconds, not thirty.
	d.devctlBoard("wifi", "ap", "add", "--ssid", "Fuel Dock", "--psk", "diesel-only")
	d.putConfig(`{"wifi":{"ssid1":"Fuel Dock","psk1":"diesel-only","dhcp_tmo_s":1,"backoff_max_s":1}}`)
	// Pier stops giving addresses: IP lost, the one retry gets none, the station moves on.
	d.devctlBoard("wifi", "ap", "fault", "--ssid", "Pier", "--fault", "no_ip")
	st = d.waitWiFi("failed over to network 1", func(m map[string]any) bool {
		return m["state"] == "connected" && m["network_index"] == 1.0
	})
	if st["ssid"] != "Fuel Dock" || st["reason"].(map[string]any)["code"] != 1001.0 || st["connect_count"] != 2.0 {
		t.Fatalf("after the failover %v", st)
	}
	// Network 1 goes out of range too: the retry finds nothing (201), Pier gives no address,
	// the round ends in backoff.
	d.devctlBoard("wifi", "ap", "remove", "--ssid", "Fuel Dock")
	st = d.waitWiFi("backoff", func(m map[string]any) bool { return m["state"] == "backoff" })
	if _, ok := st["backoff_ms"]; !ok {
		t.Fatalf("backoff status %v", st)
	}
	// Configured first, in range later: the station finds it at the end of the backoff
	// (wifi.backoff_max_s 1 here).
	start = time.Now()
	d.devctlBoard("wifi", "ap", "add", "--ssid", "Fuel Dock", "--psk", "diesel-only")
	d.waitWiFi("joined after the backoff", func(m map[string]any) bool {
		return m["state"] == "connected" && m["ssid"] == "Fuel Dock"
	})
	t.Logf("wifi ap add of a configured network to connected (backoff cap 1 s): %v", time.Since(start))

	// Scans: busy, then a result list.
	d.devctlBoard("wifi", "scan-busy", "on")
	if r := d.call("POST", "/api/v1/wifi/scan", ""); r.status != 409 || r.json(t)["error"] != "busy" {
		t.Fatalf("busy scan: %d %s", r.status, r.body)
	}
	d.devctlBoard("wifi", "scan-busy", "off")
	if r := d.call("POST", "/api/v1/wifi/scan", ""); r.status != 202 {
		t.Fatalf("scan: %d %s", r.status, r.body)
	}
	scan := getDoc[struct {
		AgeS    *int `json:"age_s"`
		Results []struct {
			SSID string `json:"ssid"`
			Auth string `json:"auth"`
		} `json:"results"`
	}](d, "/api/v1/wifi/scan")
	if scan.AgeS == nil || len(scan.Results) != 3 || scan.Results[0].SSID != "Pier" || scan.Results[1].SSID != "Marina" ||
		scan.Results[2].SSID != "Fuel Dock" || scan.Results[0].Auth != "wpa2" {
		t.Fatalf("scan %+v", scan)
	}
}

// waitNet polls GET /net/status until ok accepts it.
func (d *dev) waitNet(what string, ok func(map[string]any) bool) map[string]any {
	d.t.Helper()
	return d.waitDoc(what, "/api/v1/net/status", hangGuard, ok)
}

// TestDefaultRouteAcrossInterfaces drives Ethernet, the WiFi station and Thread with devctl:
// Ethernet over the station over Thread, each move a CHANGED edge, RSSI only on the station.
func TestDefaultRouteAcrossInterfaces(t *testing.T) {
	boardFile := filepath.Join(t.TempDir(), "board.json")
	if err := os.WriteFile(boardFile, []byte(`{"wifi":{"station_ip":"127.0.0.1"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDev(t, withArgs("--board", boardFile))
	d.devctlBoard("thread", "up", "--ip", "127.0.0.3")
	d.waitNet("thread carries the route", func(m map[string]any) bool {
		return m["iface"] == "thread" && m["ip"] == "127.0.0.3" && m["rssi"] == nil && m["up_count"] == 1.0
	})
	d.putConfig(`{"wifi":{"ssid0":"Marina","psk0":"mooring-line-7"}}`)
	d.waitNet("the station is preferred over Thread", func(m map[string]any) bool {
		return m["iface"] == "wifi_sta" && m["rssi"] == -60.0 && m["up_count"] == 2.0
	})
	d.devctlBoard("eth", "up", "--ip", "127.0.0.2")
	eth := d.waitNet("Ethernet is preferred over the station", func(m map[string]any) bool {
		return m["iface"] == "eth" && m["ip"] == "127.0.0.2" && m["up_count"] == 3.0
	})
	if eth["rssi"] != nil || eth["ip6_ll"] != "fe80::ff:fe12:abd0" {
		t.Fatalf("Ethernet route %v", eth)
	}
	// A change on a standby interface is no edge.
	d.devctlBoard("thread", "down")
	d.devctlBoard("eth", "down")
	d.waitNet("back on the station", func(m map[string]any) bool { return m["iface"] == "wifi_sta" && m["up_count"] == 4.0 })
	d.putConfig(`{"wifi":{"sta_enabled":false}}`)
	d.waitNet("the last interface went down", func(m map[string]any) bool { return m["up"] == false && m["iface"] == "none" })
	st := d.call("GET", "/api/v1/wifi/status", "").json(t)
	if st["state"] != "disabled" || st["reason"].(map[string]any)["code"] != 1005.0 {
		t.Fatalf("wifi status %v", st)
	}
}
