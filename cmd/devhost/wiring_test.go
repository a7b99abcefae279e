package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// These tests check the wiring between capabilities: each capability is tested on its own in
// its package; here the device must connect them.

func TestConfigChangeReachesTheEventStream(t *testing.T) {
	d := newDev(t)
	evs := d.events()
	d.putConfig(`{"sk":{"batch_ms":333}}`)
	var config, logs bool
	waitEvent(t, evs, hangGuard, "config and logs events", func(e event) bool {
		config = config || (e.name == "config" && e.data == `{"key":"batch_ms","ns":"sk"}`)
		logs = logs || (e.name == "logs" && strings.HasPrefix(e.data, `{"next":`))
		return config && logs
	})
}

func TestBoardDrivesMemoryNetworkAndPresence(t *testing.T) {
	d := newDev(t, withArgs("--no-health-watchdog"))
	d.boardCtl("PUT", "/memory", `{"free_heap":30000,"free_internal":15000}`)
	d.boardCtl("PUT", "/memory", `{"free_heap":200000,"free_internal":150000}`)
	info := d.info()
	if info["free_heap"] != 200000.0 || info["min_free_heap"] != 30000.0 || info["min_internal_free"] != 15000.0 {
		t.Fatalf("memory figures: %v %v %v", info["free_heap"], info["min_free_heap"], info["min_internal_free"])
	}
	// up_count counts from boot; what this test owns is the one UP edge its down/up adds. The
	// boot's own edge is counted when Ethernet comes up, which need not be before the API
	// answers: read the count once the route is up.
	upBefore := d.waitDoc("the route up after boot", "/api/v1/net/status", hangGuard, func(st map[string]any) bool {
		return st["up"] == true
	})["up_count"].(float64)
	d.boardCtl("POST", "/net/down", "")
	netDown := func() map[string]any { return d.condition("netDown") }
	pollUntil(t, "netDown after the link went down", hangGuard, netDown, func(c map[string]any) bool { return c != nil && c["state"] == "warn" })
	if st := d.call("GET", "/api/v1/net/status", "").json(t); st["up"] != false || st["iface"] != "none" || st["ip"] != "" {
		t.Fatalf("net status while down: %v", st)
	}
	d.boardCtl("POST", "/net/up", "")
	pollUntil(t, "netDown after the link came back", hangGuard, netDown, func(c map[string]any) bool { return c["state"] == "normal" })

	if st := d.call("GET", "/api/v1/net/status", "").json(t); st["up"] != true || st["up_count"] != upBefore+1 || st["hostname"] != "dev-abcd" {
		t.Fatalf("net status after the link came back: %v", st)
	}

	// The presence button opens a recovery window; a network request never can.
	if r := d.call("PUT", "/api/v1/config", `{"httpd":{"api_key":"presence-key"}}`); r.status != 200 {
		t.Fatal("set key")
	}
	pressed := time.Now()
	d.boardCtl("POST", "/button", `{"seconds":120}`)
	d.waitDoc("recovery_s after the presence button", "/api/v1/auth/status", hangGuard, func(st map[string]any) bool {
		rs, _ := st["recovery_s"].(float64)
		return rs > 0 && windowFresh(rs, 120, pressed)
	})
}

func TestUIPartitionAndPlaceholder(t *testing.T) {
	d := newDev(t)
	r := d.call("GET", "/", "")
	if r.status != 200 || !strings.Contains(strings.ToLower(string(r.body)), "<html") {
		t.Fatalf("placeholder: %d %q", r.status, r.body)
	}
	if r := d.call("GET", "/missing.js", ""); r.status != 404 || r.json(t)["error"] != "not_found" {
		t.Fatalf("missing file: %d", r.status)
	}
	if r := d.call("GET", "/api/v1/unknown", ""); r.status != 404 || r.json(t)["error"] != "not_found" {
		t.Fatalf("unknown api path: %d", r.status)
	}
	ui := filepath.Join(d.data, "flash", "ui")
	if err := os.MkdirAll(filepath.Join(ui, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ui, "index.html"), []byte("<!doctype html><title>ui</title>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ui, "assets", "app.js"), []byte("console.log(1)"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d.info()["ui_storage"] != true {
		t.Fatal("ui_storage false with index.html installed")
	}
	if r := d.call("GET", "/settings/wifi", ""); r.status != 200 || string(r.body) != "<!doctype html><title>ui</title>" || r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("SPA fallback: %d %q %q", r.status, r.body, r.header.Get("Cache-Control"))
	}
	if r := d.call("GET", "/assets/app.js", ""); r.status != 200 || r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("asset: %d %q", r.status, r.header.Get("Cache-Control"))
	}
}

func TestLogLinesCarryUTCOnceTheClockIsSet(t *testing.T) {
	d := newDev(t)
	if r := d.call("PUT", "/api/v1/time", `{"now":1795000000000}`); r.status != 200 {
		t.Fatalf("put time: %d %s", r.status, r.body)
	}
	if r := d.call("PUT", "/api/v1/config", `{"sk":{"batch_ms":150}}`); r.status != 200 {
		t.Fatal("put config")
	}
	page := d.call("GET", "/api/v1/logs?limit=1000", "").json(t)
	lines := page["lines"].([]any)
	stamped := regexp.MustCompile(`^[EWIDV] \(\d+ 2026-\d\d-\d\dT[\d:.]+Z\) `)
	if !stamped.MatchString(lines[len(lines)-1].(string)) {
		t.Fatalf("last line %q carries no UTC time", lines[len(lines)-1])
	}
	if stamped.MatchString(lines[0].(string)) {
		t.Fatalf("first line %q was rewritten", lines[0])
	}
}
