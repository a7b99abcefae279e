package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOTANoNetworkRollsBack: a new image that never gets a network marks itself invalid after
// ota.confirm_tmo_s and reboots into the previous slot.
//
// The board has no Ethernet and the configured WiFi network is never in range, so the default
// route never comes up. With a station configured the 60 s uptime rule does not confirm the
// image (the product's own rule, not overridden here), and ota.confirm_tmo_s is at the
// descriptor's minimum, 60 s: the one wait of this test that lasts a real timer.
func TestOTANoNetworkRollsBack(t *testing.T) {
	images(t)
	dir := t.TempDir()
	port := freePort(t)
	boardFile := filepath.Join(dir, "board.json")
	// No Ethernet, no access point; a portal address of its own (as the harness gives).
	portal := fmt.Sprintf("127.7.%d.%d", port>>8&0xff, port&0xff|1)
	if err := os.WriteFile(boardFile, []byte(fmt.Sprintf(`{"portal_ip":%q}`, portal)), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDev(t, withEnv("DEVHOST_KEYS="+keyDir), withArgs("--board", boardFile))
	cfg := `{"net":{"hostname":"no-net"},"wifi":{"ssid0":"Far Away","psk0":"never-in-range"},"ota":{"confirm_tmo_s":60}}`
	d.putConfig(cfg)
	if n := d.call("GET", "/api/v1/net/status", "").json(t); n["up"] != false {
		t.Fatalf("the board has a network: %v", n)
	}

	d.install(serveFile(t, newImg))
	d.waitBoot()
	booted := time.Now()
	st := d.otaStatus()
	st.expect(t, "9.9.9", 1, false, false, "0.1.0-dev")
	st.expectState(t, "pending_verify")
	// The new image tries the configured network and never gets a route.
	d.waitWiFi("the station tries the configured network", func(m map[string]any) bool {
		return m["state"] != "unconfigured" && m["state"] != "disabled" && m["state"] != "connected"
	})
	if n := d.call("GET", "/api/v1/net/status", "").json(t); n["up"] != false {
		t.Fatalf("the new image has a network: %v", n)
	}

	// After ota.confirm_tmo_s the image gives up: the previous slot boots.
	d.waitBoot()
	t.Logf("new image answered to previous slot answering: %v", time.Since(booted))
	st = d.otaStatus()
	st.expect(t, "0.1.0-dev", 0, true, true, "9.9.9")
	if st.State != "idle" || st.OtherState != "invalid" {
		t.Fatalf("after the rollback: state %q, other_state %q (want idle, invalid: marked by the image itself)", st.State, st.OtherState)
	}
	if !strings.Contains(d.out.String(), "no network within the confirm timeout") {
		t.Fatal("the rollback was not the confirm timeout's")
	}
	// The configuration is intact: the hostname, the WiFi network and the timeout itself.
	d.expectHostname("no-net")
	doc := getDoc[map[string]map[string]any](d, "/api/v1/config")
	if doc["wifi"]["ssid0"] != "Far Away" || doc["wifi"]["psk0"] != "********" || doc["ota"]["confirm_tmo_s"] != 60.0 {
		t.Fatalf("configuration after the rollback: wifi %v ota %v", doc["wifi"], doc["ota"])
	}
}
