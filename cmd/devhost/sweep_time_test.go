package main_test

import (
	"reflect"
	"testing"
)

// The time document's `sntp` object ("Time document (GET /time)") tells what the SNTP client
// runs with. time.sntp, time.server0/1 and time.from_dhcp are restart-required keys ("Known
// namespaces and keys"): a PUT changes the store, not the client, so until the reboot the
// document keeps showing the client in effect, and after it the new values.
func TestSweepTimeSNTPShowsTheClientInEffect(t *testing.T) {
	d := newDev(t)
	sntpOf := func() map[string]any {
		t.Helper()
		s, ok := d.call("GET", "/api/v1/time", "").json(t)["sntp"].(map[string]any)
		if !ok {
			t.Fatal("time document without an sntp object")
		}
		return s
	}
	before := sntpOf()
	if before["enabled"] != true || before["from_dhcp"] != true || len(before["servers"].([]any)) != 0 {
		t.Fatalf("sntp at first boot = %v, want enabled, from_dhcp, no servers", before)
	}
	r := d.call("PUT", "/api/v1/config", `{"time":{"sntp":false,"server1":"127.0.0.1:1","from_dhcp":false}}`)
	if r.status != 200 || r.json(t)["restart_required"] != true {
		t.Fatalf("PUT /config: %d %s", r.status, r.body)
	}
	// `running` turns true at the first network-up, whenever that comes: not compared.
	delete(before, "running")
	got := sntpOf()
	delete(got, "running")
	if !reflect.DeepEqual(got, before) {
		t.Fatalf("sntp before the reboot = %v, want the client in effect %v", got, before)
	}
	d.reboot()
	got = sntpOf()
	want := map[string]any{"enabled": false, "running": false, "from_dhcp": false, "servers": []any{"127.0.0.1:1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sntp after the reboot = %v, want %v", got, want)
	}
}
