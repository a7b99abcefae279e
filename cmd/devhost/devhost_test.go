package main_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPowerOnServesAndReportsIt(t *testing.T) {
	d := newDev(t)
	if want := fmt.Sprintf("http://127.0.0.1:%d", d.port); d.base != want {
		t.Fatalf("listening line names %s, want %s", d.base, want)
	}
	r := d.call("GET", "/api/v1/system/ping", "")
	if r.status != 200 || r.json(t)["app"] != "devhost" {
		t.Fatalf("ping: %d %s", r.status, r.body)
	}
	info := d.info()
	if info["reset_reason"] != "poweron" {
		t.Fatalf("reset_reason %v after power-on", info["reset_reason"])
	}
	if info["ui_storage"] != false || info["last_reset"] != nil {
		t.Fatalf("info %v", info)
	}
	// The factory document was applied to the empty store.
	if port := d.config("httpd")["port"]; port != float64(d.port) {
		t.Fatalf("httpd.port %v, want %d", port, d.port)
	}
}

func TestSigtermShutsDownCleanly(t *testing.T) {
	d := newDev(t)
	d.putConfig(`{"sk":{"batch_ms":250}}`)
	d.shutdown(hangGuard)
	d.waitPortFree()
	d.powerOn()
	if v := d.config("sk")["batch_ms"]; v != 250.0 {
		t.Fatalf("sk.batch_ms after restart: %v", v)
	}
}

// Every write that answered 200 survives a power cut in the middle of further writes.
func TestAcknowledgedWritesSurvivePowerCuts(t *testing.T) {
	d := newDev(t)
	for round := 0; round < 4; round++ {
		var acked atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for v := int64(10 + round*1000); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := d.try("PUT", "/api/v1/config", fmt.Sprintf(`{"power":{"interval_s":%d}}`, v))
				if err != nil {
					return // the power went
				}
				if r.status == 200 {
					acked.Store(v)
				}
			}
		}()
		// The power goes once the write numbered 10*(round+1) was acknowledged, while the
		// next is in flight: counted in writes, not in time, so that a slow machine cuts as
		// far into the sequence as a fast one.
		first := int64(10 + round*1000)
		n := int64(10 * (round + 1))
		pollUntil(t, fmt.Sprintf("round %d: write %d acknowledged", round, n), hangGuard, acked.Load,
			func(v int64) bool { return v >= first+n-1 })
		d.powerCut()
		close(stop)
		<-done
		last := acked.Load()
		d.powerOn()
		got, _ := d.config("power")["interval_s"].(float64)
		if int64(got) < last {
			t.Fatalf("round %d: acknowledged %d, read back %v after the power cut", round, last, got)
		}
	}
}

func TestRebootRefusesWritesThenComesBackAsSoftware(t *testing.T) {
	d := newDev(t)
	r := d.call("POST", "/api/v1/system/reboot", "")
	if r.status != 202 || r.json(t)["status"] != "rebooting" {
		t.Fatalf("reboot: %d %s", r.status, r.body)
	}
	w := d.call("PUT", "/api/v1/config", `{"sk":{"batch_ms":300}}`)
	if w.status != 503 || w.json(t)["error"] != "restarting" {
		t.Fatalf("write during pending reboot: %d %s", w.status, w.body)
	}
	d.waitBoot()
	if info := d.info(); info["reset_reason"] != "software" {
		t.Fatalf("reset_reason %v after reboot", info["reset_reason"])
	}
	if v := d.config("sk")["batch_ms"]; v != 100.0 {
		t.Fatalf("the refused write landed: %v", v)
	}
}

func TestFactoryResetErasesEverything(t *testing.T) {
	d := newDev(t)
	d.putConfig(`{"httpd":{"api_key":"secret-key-1"},"sk":{"batch_ms":400},"wifi":{"ssid0":"boat"}}`)
	d.key = "secret-key-1"
	r := d.call("POST", "/api/v1/system/factory-reset", "")
	if r.status != 202 {
		t.Fatalf("factory reset: %d %s", r.status, r.body)
	}
	if m := r.json(t); m["status"] != "factory_reset" || m["rebooting"] != true {
		t.Fatalf("factory reset body %v", m)
	}
	d.waitBoot()
	d.key = ""
	cfg := d.call("GET", "/api/v1/config", "")
	if cfg.status != 200 {
		t.Fatalf("the key survived the factory reset: %d", cfg.status)
	}
	m := cfg.json(t)
	if m["httpd"].(map[string]any)["api_key"] != "" || m["sk"].(map[string]any)["batch_ms"] != 100.0 || m["wifi"].(map[string]any)["ssid0"] != "" {
		t.Fatalf("values survived: %v %v %v", m["httpd"], m["sk"].(map[string]any)["batch_ms"], m["wifi"].(map[string]any)["ssid0"])
	}
	if m["httpd"].(map[string]any)["port"] != float64(d.port) {
		t.Fatal("factory document not applied after the reset")
	}
	if d.info()["reset_reason"] != "software" {
		t.Fatal("reset reason after factory reset")
	}
}

func TestPanicKeepsCoreDumpAndRestarts(t *testing.T) {
	d := newDev(t, withArgs("--debug-crash"))
	if r := d.call("GET", "/api/v1/system/coredump", ""); r.status != 404 || r.json(t)["error"] != "not_found" {
		t.Fatalf("coredump before a crash: %d %s", r.status, r.body)
	}
	if r := d.call("POST", "/api/v1/system/crash", ""); r.status != 202 {
		t.Fatalf("crash: %d %s", r.status, r.body)
	}
	d.waitBoot()
	if info := d.info(); info["reset_reason"] != "panic" {
		t.Fatalf("reset_reason %v after a panic", info["reset_reason"])
	}
	cd := d.call("GET", "/api/v1/system/coredump", "")
	if cd.status != 200 {
		t.Fatalf("coredump: %d %s", cd.status, cd.body)
	}
	m := cd.json(t)
	exe, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(exe)
	if m["app_elf_sha256"] != hex.EncodeToString(sum[:]) {
		t.Fatalf("app_elf_sha256 %v", m["app_elf_sha256"])
	}
	if m["present"] != true || m["valid"] != true || m["task"] == "" || m["task"] == nil {
		t.Fatalf("summary %v", m)
	}
	if bt, _ := m["backtrace"].([]any); len(bt) == 0 {
		t.Fatalf("no backtrace in %v", m)
	}
	raw := d.call("GET", "/api/v1/system/coredump/raw", "")
	if raw.status != 200 || !strings.Contains(string(raw.body), "deliberate crash") {
		t.Fatalf("raw: %d %q", raw.status, raw.body)
	}
	if r := d.call("DELETE", "/api/v1/system/coredump", ""); r.status != 200 || r.json(t)["status"] != "erased" {
		t.Fatalf("erase: %d %s", r.status, r.body)
	}
	if r := d.call("GET", "/api/v1/system/coredump", ""); r.status != 404 {
		t.Fatalf("coredump after erase: %d", r.status)
	}
}

func TestCrashEndpointNeedsItsBuildOption(t *testing.T) {
	d := newDev(t)
	if r := d.call("POST", "/api/v1/system/crash", ""); r.status != 404 {
		t.Fatalf("crash without HTTPD_DEBUG_CRASH: %d", r.status)
	}
}

// Three power-on cycles, each within 20 s of its boot, open the recovery window.
func TestLostKeyRecoveryByPowerCycles(t *testing.T) {
	d := newDev(t)
	d.putConfig(`{"httpd":{"api_key":"lost-key-123"}}`)
	status := func() map[string]any { return d.call("GET", "/api/v1/auth/status", "").json(t) }
	if s := status(); s["required"] != true || s["recovery_s"] != 0.0 {
		t.Fatalf("status %v", s)
	}
	for i := 1; i <= 3; i++ {
		d.powerCut()
		on := time.Now()
		d.powerOn()
		rs := status()["recovery_s"].(float64)
		if i < 3 && rs != 0 {
			t.Fatalf("window open after %d cycles", i)
		}
		if i == 3 && (rs == 0 || !windowFresh(rs, 600, on)) {
			t.Fatalf("recovery_s %v after 3 power cycles, %v after the power came back", rs, time.Since(on))
		}
	}
	// The window lives in RAM: a software reboot ends it.
	d.key = "lost-key-123"
	d.reboot()
	if rs := status()["recovery_s"]; rs != 0.0 {
		t.Fatalf("window survived a reboot: %v", rs)
	}
}

func TestAuthenticationEndToEnd(t *testing.T) {
	d := newDev(t)
	d.putConfig(`{"httpd":{"api_key":"boat-key-42"}}`)
	r := d.call("GET", "/api/v1/system/info", "")
	if r.status != 401 || r.json(t)["error"] != "unauthorized" || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer realm=") {
		t.Fatalf("no credential: %d %v", r.status, r.header)
	}
	if r := d.call("GET", "/api/v1/system/info", "", "Authorization", "Bearer boat-key-42"); r.status != 200 {
		t.Fatalf("bearer: %d", r.status)
	}
	login := d.call("POST", "/api/v1/auth/login", `{"key":"boat-key-42"}`)
	if login.status != 204 {
		t.Fatalf("login: %d %s", login.status, login.body)
	}
	cookie := login.header.Get("Set-Cookie")
	for _, attr := range []string{"dev_sid=", "HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=86400"} {
		if !strings.Contains(cookie, attr) {
			t.Fatalf("cookie %q lacks %s", cookie, attr)
		}
	}
	sid := strings.SplitN(cookie, ";", 2)[0]
	if r := d.call("GET", "/api/v1/system/info", "", "Cookie", sid); r.status != 200 {
		t.Fatalf("cookie: %d", r.status)
	}
	// A cookie write from another origin is refused; from the device's own origin it passes.
	if r := d.call("PUT", "/api/v1/config", `{"sk":{"batch_ms":120}}`, "Cookie", sid, "Origin", "http://evil.example"); r.status != 403 {
		t.Fatalf("cross-origin cookie write: %d", r.status)
	}
	host := strings.TrimPrefix(d.base, "http://")
	if r := d.call("PUT", "/api/v1/config", `{"sk":{"batch_ms":120}}`, "Cookie", sid, "Origin", "http://"+host); r.status != 200 {
		t.Fatalf("same-origin cookie write: %d %s", r.status, r.body)
	}
	// Changing the key drops every session.
	if r := d.call("PUT", "/api/v1/config", `{"httpd":{"api_key":"boat-key-43"}}`, "Authorization", "Bearer boat-key-42"); r.status != 200 {
		t.Fatalf("change key: %d", r.status)
	}
	if r := d.call("GET", "/api/v1/system/info", "", "Cookie", sid); r.status != 401 {
		t.Fatalf("session survived a key change: %d", r.status)
	}
	// Five wrong keys lock key checks out; the 429 carries Retry-After.
	for i := 0; i < 5; i++ {
		d.call("GET", "/api/v1/system/info", "", "Authorization", "Bearer wrong-"+strconv.Itoa(i))
	}
	r = d.call("GET", "/api/v1/system/info", "", "Authorization", "Bearer boat-key-43")
	if r.status != http.StatusTooManyRequests || r.json(t)["error"] != "too_many_attempts" || r.header.Get("Retry-After") == "" {
		t.Fatalf("throttle: %d %v", r.status, r.header)
	}
}

func TestAuthRequiredStartOption(t *testing.T) {
	d := newDev(t, withArgs("--auth-required"))
	r := d.call("GET", "/api/v1/system/info", "")
	if r.status != 403 || r.json(t)["error"] != "auth_unconfigured" {
		t.Fatalf("info with no key under HTTPD_AUTH_REQUIRED: %d %s", r.status, r.body)
	}
	if p := d.call("GET", "/api/v1/system/ping", "").json(t); p["auth"] != true {
		t.Fatalf("ping %v", p)
	}
}

// The health policy restarts after three ticks with a fatal alarm and leaves its record.
func TestHealthWatchdogRestart(t *testing.T) {
	d := newDev(t, withArgs("--health-tick", "100ms"))
	d.boardCtl("PUT", "/memory", `{"free_internal":4096}`)
	d.waitBoot()
	info := d.info()
	if info["reset_reason"] != "software" {
		t.Fatalf("reset_reason %v after a watchdog restart", info["reset_reason"])
	}
	rec, ok := info["last_reset"].(map[string]any)
	if !ok || rec["reason"] != "software" || rec["health_key"] != "lowMemory" {
		t.Fatalf("last_reset %v", info["last_reset"])
	}
	if again := d.info(); again["last_reset"] != nil {
		t.Fatalf("last_reset not cleared by the first read: %v", again["last_reset"])
	}
}
