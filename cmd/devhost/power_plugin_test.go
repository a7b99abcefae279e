package main_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"devhost/host/plugin/trust"
	"devhost/plugins"
)

// TestPluginPowerHolds: a plugin's power hold shows in GET /power under the plugin's own
// owner, and ends with the plugin's instance: when it is stopped, and when it crashes (the
// powerhold test plugin holds at every start and traps while f_powerhold.trap is true, until
// the host disables it).
func TestPluginPowerHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	keys := t.TempDir()
	if _, _, err := trust.LoadOrCreateDevKey(keys); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	wasm, bundle := filepath.Join(work, "powerhold.wasm"), filepath.Join(work, "powerhold.devplug")
	if err := plugins.Build(ctx, "testdata/powerhold", wasm); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, devctl, args...)
		cmd.Env = append(os.Environ(), "DEVHOST_KEYS="+keys)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("devctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctl("plugin", "pack", "--manifest", filepath.Join(plugins.Dir(), "testdata", "powerhold", "manifest.json"), "--wasm", wasm, "--out", bundle)

	d := newDev(t, withEnv("DEVHOST_KEYS="+keys))
	type holds struct {
		Total int            `json:"total"`
		By    map[string]int `json:"by"`
	}
	getHolds := func() holds {
		t.Helper()
		var doc struct {
			Holds holds `json:"holds"`
		}
		r := d.call("GET", "/api/v1/power", "")
		if r.status != 200 || json.Unmarshal(r.body, &doc) != nil {
			t.Fatalf("GET /power: %d %s", r.status, r.body)
		}
		return doc.Holds
	}
	waitHolds := func(what string, want map[string]int) {
		t.Helper()
		deadline := time.Now().Add(hangGuard)
		for {
			h := getHolds()
			total := 0
			for _, n := range want {
				total += n
			}
			if h.Total == total && maps.Equal(h.By, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: holds %+v, want %v", what, h, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	pluginState := func() map[string]any {
		t.Helper()
		r := d.call("GET", "/api/v1/plugins/powerhold", "")
		if r.status != 200 {
			t.Fatalf("GET /plugins/powerhold: %d %s", r.status, r.body)
		}
		return r.json(t)
	}
	waitState := func(state string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(hangGuard)
		for {
			st := pluginState()
			if st["state"] == state {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("plugin state %v, want %s", st["state"], state)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitHolds("before any plugin", map[string]int{})

	ctl("plugin", "install", "--url", d.base, "--grant-all", bundle)
	waitState("running")
	waitHolds("the running plugin holds", map[string]int{"plugin:powerhold": 1})

	if r := d.call("POST", "/api/v1/plugins/powerhold/stop", ""); r.status != 200 {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	waitState("stopped")
	waitHolds("the stopped plugin released its hold", map[string]int{})

	if r := d.call("POST", "/api/v1/plugins/powerhold/start", ""); r.status != 200 {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	waitState("running")
	waitHolds("the started plugin holds again", map[string]int{"plugin:powerhold": 1})

	// From now on every instance holds, then traps; the host restarts it with backoff until it
	// disables it. No crashed instance's hold may remain.
	if r := d.call("PUT", "/api/v1/config", `{"f_powerhold":{"trap":true}}`); r.status != 200 {
		t.Fatalf("PUT /config: %d %s", r.status, r.body)
	}
	st := waitState("disabled")
	if n, _ := st["restarts"].(float64); n < 1 {
		t.Fatalf("the plugin was not restarted after its crash: %v", st)
	}
	waitHolds("the crashed plugin released its holds", map[string]int{})
}
