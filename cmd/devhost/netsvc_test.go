package main_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"devhost/host/mdns/mdnstest"
	"devhost/host/sntp/sntptest"
)

// The device takes its clock from a real NTP server (chronyd on loopback) once the network
// is up: source sntp, which a manual set can no longer override.
func TestSNTPSetsTheDeviceClock(t *testing.T) {
	ntpd := sntptest.Chrony(t, true)
	d := newDev(t)
	d.putConfig(fmt.Sprintf(`{"time":{"server0":%q}}`, ntpd.Addr))
	// The SNTP keys take effect at the next boot.
	d.reboot()
	var doc map[string]any
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if doc = d.call("GET", "/api/v1/time", "").json(t); doc["source"] == "sntp" {
			break
		}
	}
	if doc["source"] != "sntp" || doc["synced"] != true {
		t.Fatalf("time document %v", doc)
	}
	want := map[string]any{"enabled": true, "running": true, "from_dhcp": true, "servers": []any{ntpd.Addr}}
	if !reflect.DeepEqual(doc["sntp"], want) {
		t.Fatalf("sntp %v, want %v", doc["sntp"], want)
	}
	if now := time.UnixMilli(int64(doc["now"].(float64))); time.Since(now) > time.Minute || time.Until(now) > time.Minute {
		t.Fatalf("device time %v, this machine's %v", now, time.Now())
	}
	if r := d.call("PUT", "/api/v1/time", `{"now":1795000000000}`); r.status != 409 || r.json(t)["error"] != "outranked" {
		t.Fatalf("manual time over sntp: %d %s", r.status, r.body)
	}
}

// The device started with --mdns-iface advertises itself as the spec's "mDNS records" say,
// follows a host name change and says goodbye at shutdown; python3-zeroconf watches, in a
// network namespace of the test's own.
func TestMDNSAdvertisesTheDevice(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	python := mdnstest.Python(t)
	devs := mdnstest.StartPeer(t, python, "browse", "_dev._tcp")
	https := mdnstest.StartPeer(t, python, "browse", "_http._tcp")
	devs.Wait("browsing", "")
	https.Wait("browsing", "")
	d := newDev(t, withArgs("--mdns-iface", "lo"))
	info := d.info()
	st := d.call("GET", "/api/v1/net/status", "").json(t)
	host := st["hostname"].(string)
	m := devs.Wait("added", host+"._dev._tcp.local.")
	txt := m["txt"].(map[string]any)
	want := map[string]any{"v": info["version"], "app": info["app"], "dev": info["idf_version"], "target": info["chip"],
		"id": st["id"], "api": "/api/v1", "auth": "0"}
	if !reflect.DeepEqual(txt, want) || m["server"] != host+".local." || m["port"] != float64(d.port) ||
		!reflect.DeepEqual(m["addresses"], []any{"127.0.0.1"}) {
		t.Fatalf("zeroconf resolved %v\nwant TXT %v on %s.local:%d", m, want, host, d.port)
	}
	m = https.Wait("added", host+"._http._tcp.local.")
	if !reflect.DeepEqual(m["txt"], map[string]any{"path": "/"}) || m["port"] != float64(d.port) {
		t.Fatalf("zeroconf resolved %v", m)
	}

	// A new host name: goodbye under the old one, the services under the new one.
	d.putConfig(`{"net":{"hostname":"boat"}}`)
	devs.Wait("removed", host+"._dev._tcp.local.")
	https.Wait("removed", host+"._http._tcp.local.")
	if m := devs.Wait("added", "boat._dev._tcp.local."); m["server"] != "boat.local." {
		t.Fatalf("after the rename %v", m)
	}
	https.Wait("added", "boat._http._tcp.local.")

	// Shutdown: goodbyes.
	d.shutdown(15 * time.Second)
	devs.Wait("removed", "boat._dev._tcp.local.")
	https.Wait("removed", "boat._http._tcp.local.")
}
