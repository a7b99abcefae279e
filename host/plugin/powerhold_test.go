package plugin

import (
	"maps"
	"net/http"
	"testing"
	"time"

	"devhost/abi"
)

// TestPowerHoldsPerPlugin: each plugin's power_hold counts under its own id, and the host
// releases a plugin's hold when its instance ends, whether it was stopped, crashed or removed;
// a restarted instance holds again only when it asks again.
func TestPowerHoldsPerPlugin(t *testing.T) {
	h := newHarness(t)
	h.run()
	// The probe plugins call power_hold(1) in dev_init; /<id>/panic traps inside a request.
	for _, id := range []string{"probeone", "probetwo"} {
		h.start(id, abi.CapPowerHold, abi.CapHTTP)
	}
	holds := func(what string, want map[string]int) {
		t.Helper()
		waitFor(t, what, func() bool { return maps.Equal(h.power.by(), want) })
	}
	holds("both plugins hold", map[string]int{"probeone": 1, "probetwo": 1})

	if code, body := h.do(http.MethodPost, "/plugins/probeone/stop", nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("stop: %d %s", code, body)
	}
	h.waitState("probeone", StateStopped)
	holds("the stopped plugin released its hold", map[string]int{"probetwo": 1})

	h.do(http.MethodGet, "/probetwo/panic", nil)
	h.waitState("probetwo", StateFailed)
	holds("the crashed plugin released its hold", map[string]int{})

	// The restart after the backoff is a new instance: its dev_init holds again.
	h.clk.Advance(time.Second)
	h.waitState("probetwo", StateRunning)
	holds("the restarted plugin holds again", map[string]int{"probetwo": 1})

	if code, body := h.do(http.MethodDelete, "/plugins/probetwo", nil); code != http.StatusOK {
		t.Fatalf("remove: %d %s", code, body)
	}
	holds("the removed plugin released its hold", map[string]int{})
}
