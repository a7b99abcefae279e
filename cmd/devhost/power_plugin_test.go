package main_test

import (
	"fmt"
	"maps"
	"testing"
)

// TestPluginPowerHolds: a plugin's power hold shows in GET /power under the plugin's own
// owner, and ends with the plugin's instance: when it is stopped, and when it crashes (the
// powerhold test plugin holds at every start and traps while f_powerhold.trap is true, until
// the host disables it).
func TestPluginPowerHolds(t *testing.T) {
	ctx := guardCtx(t, 2)
	p := packPlugin(ctx, t, "testdata/powerhold")
	d := newDev(t, p.trusted())
	type holds struct {
		Total int            `json:"total"`
		By    map[string]int `json:"by"`
	}
	getHolds := func() holds {
		t.Helper()
		return getDoc[struct {
			Holds holds `json:"holds"`
		}](d, "/api/v1/power").Holds
	}
	waitHolds := func(what string, want map[string]int) {
		t.Helper()
		total := 0
		for _, n := range want {
			total += n
		}
		pollUntil(t, fmt.Sprintf("%s: holds, want %v", what, want), hangGuard, getHolds, func(h holds) bool {
			return h.Total == total && maps.Equal(h.By, want)
		})
	}
	waitState := func(state string) map[string]any {
		t.Helper()
		return pollUntil(t, "plugin state, want "+state, hangGuard, func() map[string]any {
			return getDoc[map[string]any](d, "/api/v1/plugins/powerhold")
		}, func(st map[string]any) bool { return st["state"] == state })
	}
	waitHolds("before any plugin", map[string]int{})

	p.install(ctx, t, d)
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
	d.putConfig(`{"f_powerhold":{"trap":true}}`)
	st := waitState("disabled")
	if n, _ := st["restarts"].(float64); n < 1 {
		t.Fatalf("the plugin was not restarted after its crash: %v", st)
	}
	waitHolds("the crashed plugin released its holds", map[string]int{})
}
