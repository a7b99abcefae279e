package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// newProvDev starts a device built as make build builds it, carrying the ble plugin that
// provisions it, and waits until the plugin answers GET /prov (bundles load in the
// background).
func newProvDev(t *testing.T, opts ...devOpt) *dev {
	t.Helper()
	b := buildBundled(t)
	d := newDev(t, append([]devOpt{withBinary(b.plain), withEnv("DEVHOST_KEYS=" + b.keys)}, opts...)...)
	d.waitProv()
	return d
}

// waitProv waits for the ble plugin's GET /prov.
func (d *dev) waitProv() {
	d.t.Helper()
	d.waitDoc("the ble plugin answers", "/api/v1/prov", hangGuard, func(doc map[string]any) bool { return doc["active"] != nil })
}

// Provisioning end to end as a phone app does it: the device boots with no network
// configured, provisioning runs over the setup portal, devctl prov (playing the app) opens a
// security-1 session with the PoP from the device label and sends the credentials; the
// station joins the board's access point.
func TestProvisionSoftAP(t *testing.T) {
	var ip string
	d := newProvDev(t, withPortalBoard(&ip))
	portal := fmt.Sprintf("http://%s:%d", ip, d.port)
	waitPortal(t, portal, true)
	d.devctlBoard("wifi", "ap", "add", "--ssid", "boat", "--psk", "password1")

	if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["active"] != true || doc["scheme"] != "ble" {
		t.Fatalf("GET /prov at boot: %v", doc)
	}
	d.putConfig(`{"f_ble":{"prov_scheme":"softap"}}`)
	doc := d.waitDoc("provisioning moved to softap", "/api/v1/prov", hangGuard, func(doc map[string]any) bool { return doc["scheme"] == "softap" })
	if doc["active"] != true || doc["got_credentials"] != false || doc["scheme"] != "softap" {
		t.Fatalf("GET /prov at boot: %v", doc)
	}
	if ok, _ := regexp.MatchString(`^PROV_[0-9A-F]{6}$`, fmt.Sprint(doc["service_name"])); !ok {
		t.Fatalf("service_name %v", doc["service_name"])
	}
	label, err := os.ReadFile(filepath.Join(d.data, "flash", "device-label.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pop := fmt.Sprint(doc["pop"])
	if !strings.Contains(string(label), "pop: "+pop+"\n") || !strings.Contains(string(label), fmt.Sprint(doc["service_name"])) {
		t.Fatalf("label %q does not carry the PoP %q", label, pop)
	}

	// The endpoints are absent on the station side.
	if r := portalCall(t, d.base, "POST", "/prov-session", "x", "Content-Type", "application/x-www-form-urlencoded"); r.status == 200 {
		t.Fatalf("prov-session answered on the station side: %d", r.status)
	}

	prov := func(pop string) (string, error) {
		out, err := exec.Command(devctl, "prov", "--data", filepath.Join(d.data, "flash"), "--transport", "softap",
			"--url", portal, "--pop", pop, "--ssid", "boat", "--passphrase", "password1").CombinedOutput()
		return string(out), err
	}
	// A wrong PoP is refused and nothing is stored.
	if out, err := prov("wrong-pop"); err == nil {
		t.Fatalf("devctl prov with a wrong PoP succeeded:\n%s", out)
	}
	if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["got_credentials"] != false || doc["active"] != true {
		t.Fatalf("after a wrong PoP: %v", doc)
	}
	if st := d.call("GET", "/api/v1/wifi/status", "").json(t); st["state"] != "unconfigured" {
		t.Fatalf("station after a wrong PoP: %v", st["state"])
	}

	out, err := prov(pop)
	if err != nil {
		t.Fatalf("devctl prov: %v\n%s", err, out)
	}
	if !strings.Contains(out, "connected:") {
		t.Fatalf("devctl prov output:\n%s", out)
	}
	t.Logf("devctl prov:\n%s", out)
	st := d.waitWiFi("joined the provisioned network", func(st map[string]any) bool {
		return st["state"] == "connected" && st["ssid"] == "boat"
	})
	doc = d.call("GET", "/api/v1/prov", "").json(t)
	if doc["got_credentials"] != true {
		t.Fatalf("GET /prov after provisioning: %v", doc)
	}
	// Provisioning still running after the station read connected means the plugin held the
	// portal up for the app then (portal_hold): the status must say the portal is up, and it is.
	if doc["active"] == true {
		if p, _ := st["portal"].(map[string]any); p["active"] != true {
			t.Fatalf("GET /wifi/status while the plugin holds the portal: portal %v", st["portal"])
		}
		waitPortal(t, portal, true)
		t.Logf("portal held after the join: %v", st["portal"])
	}
}

// The same over BLE: the device advertises its service name, devctl prov connects the
// board's simulated central and provisions through GATT.
func TestProvisionBLE(t *testing.T) {
	d := newProvDev(t)
	d.devctlBoard("wifi", "ap", "add", "--ssid", "boat", "--psk", "password1")
	flash := filepath.Join(d.data, "flash")
	doc := d.call("GET", "/api/v1/prov", "").json(t)
	if doc["active"] != true || doc["scheme"] != "ble" {
		t.Fatalf("GET /prov at boot: %v", doc)
	}
	if out := d.devctlBoard("ble", "adverts"); !strings.Contains(out, fmt.Sprintf(`"name": %q`, doc["service_name"])) {
		t.Fatalf("ble adverts:\n%s", out)
	}
	prov := func(pop string) (string, error) {
		out, err := exec.Command(devctl, "prov", "--data", flash, "--transport", "ble", "--pop", pop,
			"--ssid", "boat", "--passphrase", "password1").CombinedOutput()
		return string(out), err
	}
	if out, err := prov("wrong-pop"); err == nil {
		t.Fatalf("wrong PoP accepted:\n%s", out)
	}
	if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["got_credentials"] != false {
		t.Fatalf("after a wrong PoP: %v", doc)
	}
	out2, err := prov(fmt.Sprint(doc["pop"]))
	if err != nil || !strings.Contains(out2, "connected:") {
		t.Fatalf("devctl prov --transport ble: %v\n%s", err, out2)
	}
	t.Logf("devctl prov --transport ble:\n%s", out2)
	d.waitWiFi("joined the provisioned network", func(st map[string]any) bool {
		return st["state"] == "connected" && st["ssid"] == "boat"
	})
	if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["got_credentials"] != true {
		t.Fatalf("GET /prov after provisioning: %v", doc)
	}
}

// The gateway lists what the scanner hears once f_ble.gateway is on; a configured sensor's
// advert is decoded, another is listed undecoded.
func TestBLEGatewayListsAdverts(t *testing.T) {
	d := newProvDev(t)
	// Provisioning starts once the device is up (no network is configured); wait for it.
	deadline := time.Now().Add(hangGuard)
	st := d.call("GET", "/api/v1/ble/status", "").json(t)
	for st["prov"].(map[string]any)["active"] != true && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		st = d.call("GET", "/api/v1/ble/status", "").json(t)
	}
	if st["scanning"] != false || st["prov"].(map[string]any)["active"] != true {
		t.Fatalf("GET /ble/status at boot: %v", st)
	}
	d.putConfig(`{"f_ble":{"gateway":true,"sensors":"[{\"address\":\"AA:BB:CC:DD:EE:01\",\"kind\":\"bthome\",\"key\":\"\",\"prefix\":\"environment.cabin\"}]"}}`)
	d.waitDoc("the scan is on", "/api/v1/ble/status", hangGuard, func(doc map[string]any) bool { return doc["scanning"] == true })
	for _, addr := range []string{"11:22:33:44:55:66", "aa:bb:cc:dd:ee:01"} {
		d.devctlBoard("ble", "advert", "--addr", addr, "--data", "0201060716d2fc4002c409", "--rssi", "-65")
	}
	st = d.call("GET", "/api/v1/ble/status", "").json(t)
	if prov := st["prov"].(map[string]any); prov["active"] != true || prov["scheme"] != "ble" {
		t.Fatalf("provisioning after the gateway keys changed: %v", prov)
	}
	devs, _ := st["devices"].([]any)
	if st["scanning"] != true || len(devs) != 2 {
		t.Fatalf("GET /ble/status: %v", st)
	}
	newest := devs[0].(map[string]any)
	// A configured BTHome sensor (temperature 25.00 °C) decodes; the other is only listed.
	if newest["address"] != "AA:BB:CC:DD:EE:01" || newest["rssi"] != float64(-65) || newest["decoded"] != true || newest["kind"] != "bthome" {
		t.Fatalf("newest device %v", newest)
	}
	if other := devs[1].(map[string]any); other["decoded"] != false {
		t.Fatalf("unconfigured device %v", other)
	}
	if stats := st["stats"].(map[string]any); stats["heard"] != float64(2) || stats["decoded"] != float64(1) || stats["refused"] != float64(0) {
		t.Fatalf("stats %v", stats)
	}
}

// A device with a network configured does not provision at boot; a button press starts it.
func TestProvisionButton(t *testing.T) {
	d := newProvDev(t)
	d.putConfig(`{"wifi":{"ssid0":"boat","psk0":"password1"}}`)
	d.powerCut()
	d.powerOn()
	d.waitProv()
	if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["active"] != false {
		t.Fatalf("provisioning at boot with a network configured: %v", doc)
	}
	d.devctlBoard("button")
	d.waitDoc("button press did not start provisioning", "/api/v1/prov", hangGuard, func(doc map[string]any) bool {
		return doc["active"] == true && doc["got_credentials"] == false
	})
}

// A wrong passphrase and a network out of range reach the app as ConnectionFailed with
// AuthError and NetworkNotFound; provisioning stays up for the next try.
func TestProvisionFailureReasons(t *testing.T) {
	d := newProvDev(t)
	d.devctlBoard("wifi", "ap", "add", "--ssid", "boat", "--psk", "password1")
	flash := filepath.Join(d.data, "flash")
	pop := fmt.Sprint(d.call("GET", "/api/v1/prov", "").json(t)["pop"])
	for _, c := range []struct{ ssid, pass, want string }{
		{"boat", "not-the-password", "AuthError"},
		{"elsewhere", "password1", "NetworkNotFound"},
		{"boat", "password1", ""},
	} {
		out, err := exec.Command(devctl, "prov", "--data", flash, "--transport", "ble", "--pop", pop,
			"--ssid", c.ssid, "--passphrase", c.pass).CombinedOutput()
		if c.want == "" {
			if err != nil || !strings.Contains(string(out), "connected:") {
				t.Fatalf("retry with the right credentials: %v\n%s", err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Fatalf("%s/%s: want %s, got %v\n%s", c.ssid, c.pass, c.want, err, out)
		}
		if doc := d.call("GET", "/api/v1/prov", "").json(t); doc["active"] != true {
			t.Fatalf("provisioning stopped after a failure: %v", doc)
		}
	}
}
