package plugin

import (
	"encoding/hex"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"devhost/abi"
)

// Two modules from the issue that found the defects, as the bundles it installed.
const (
	// spinHex's start function loops forever: it runs while the module is instantiated.
	spinHex = "0061736d010000000108026000006000017f0304030101000503010001072103066d656d6f72790200086465765f696e69740000096465765f6576656e7400010801020a1303040041000b040041000b070003400c000b0b"
	// recurseHex's dev_init calls itself without end.
	recurseHex = "0061736d010000000108026000006000017f03030201010503010001072103066d656d6f72790200086465765f696e69740000096465765f6576656e7400010a0e02070010001a41000b040041000b"
)

func rawBundle(t *testing.T, id, moduleHex string) []byte {
	t.Helper()
	mod, err := hex.DecodeString(moduleHex)
	if err != nil {
		t.Fatal(err)
	}
	b, err := abi.Pack(manifest(id), mod, loadKey(t, "publisher"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A start function that never returns is under the time limit: the plugin fails with a
// last_error saying so, the condition names it, it is restarted with backoff and disabled
// after repeated failures, and a reboot does not start it again.
func TestStartFunctionUnderTheTimeLimit(t *testing.T) {
	var loads atomic.Int32
	h := newHarness(t, func(o *Options) {
		o.CallTimeout = 300 * time.Millisecond
		o.MaxFailures = 2
	})
	h.m.loadHook = func(string) { loads.Add(1) }
	h.run()
	h.install(rawBundle(t, "spin", spinHex), nil)
	st := h.waitState("spin", StateFailed)
	if got := deref(st.LastError); got != "start: time limit exceeded" {
		t.Errorf("last_error %q, want %q", got, "start: time limit exceeded")
	}
	if c, ok := h.condition(HealthKey); !ok || c.State != "warn" || !strings.Contains(c.Message, "spin failed (1 in a row): start: time limit exceeded") {
		t.Errorf("health %+v, want warn naming spin and its error", c)
	}
	h.pingOK()
	// The restart stays a warning while it loads (no flicker to normal between attempts).
	h.m.startHook = func(string) {
		if c, ok := h.condition(HealthKey); !ok || c.State != "warn" || !strings.Contains(c.Message, "spin restarting after 1 failures in a row") {
			t.Errorf("health while restarting %+v, want warn", c)
		}
	}
	h.clk.Advance(time.Second) // the first restart
	st = h.waitState("spin", StateDisabled)
	if !strings.Contains(deref(st.LastError), "start: time limit exceeded") || st.Wanted != WantDisabled {
		t.Errorf("disabled with %q, wanted %s", deref(st.LastError), st.Wanted)
	}
	// The state is published before the condition is updated: wait for the condition.
	waitFor(t, "the plugins condition in alarm", func() bool {
		c, ok := h.condition(HealthKey)
		return ok && c.State == "alarm"
	})
	if n := loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2", n)
	}

	h.stop() // a reboot, with the hook in place before the new Manager runs
	h.device()
	h.boot()
	h.m.loadHook = func(string) { loads.Add(1) }
	h.run()
	if st, _ := h.m.Status("spin"); st.State != StateDisabled {
		t.Errorf("after a reboot: %s, want disabled", st.State)
	}
	h.pingOK()
	if n := loads.Load(); n != 2 {
		t.Errorf("the reboot loaded the disabled plugin (%d loads)", n)
	}
}

// Stop and DELETE win over a start function that runs (the time limit is far away): they
// answer, the plugin is stopped (or gone) and nothing is counted against it.
func TestStopAndRemoveWinDuringTheStart(t *testing.T) {
	starting := make(chan string, 4)
	h := newHarness(t, func(o *Options) { o.CallTimeout = 10 * time.Minute })
	h.m.startHook = func(id string) { starting <- id }
	h.run()
	h.install(rawBundle(t, "spin", spinHex), nil)
	<-starting
	code, body := h.do(http.MethodPost, "/plugins/spin/stop", nil)
	if code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	st := h.waitState("spin", StateStopped)
	if st.LastError != nil || st.Failures != 0 {
		t.Errorf("a stop counted against the plugin: last_error %q, failures %d", deref(st.LastError), st.Failures)
	}
	if c, ok := h.condition(HealthKey); ok && c.State != "normal" {
		t.Errorf("health %+v after a stop", c)
	}

	code, body = h.do(http.MethodPost, "/plugins/spin/start", nil)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	<-starting
	code, body = h.do(http.MethodDelete, "/plugins/spin", nil)
	if code != http.StatusOK && code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	if _, ok := h.m.Status("spin"); ok {
		t.Error("the plugin is still installed")
	}
	h.pingOK()
}

// Endless recursion traps at the stack budget instead of growing the host's memory: the
// plugin fails naming the cause, and the host allocates little on the way.
func TestRecursionStopsAtTheStackBudget(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxFailures = 1 })
	h.run()
	h.install(rawBundle(t, "deep", recurseHex), nil) // compiled here: its allocations are not counted
	h.waitState("deep", StateDisabled)
	h.do(http.MethodPost, "/plugins/deep/start", nil)
	h.waitState("deep", StateDisabled)

	rssBefore := rss()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 3 {
		h.do(http.MethodPost, "/plugins/deep/start", nil)
		st := h.waitState("deep", StateDisabled)
		if !strings.Contains(deref(st.LastError), "dev_init: trap: stack budget exceeded") {
			t.Fatalf("last_error %q, want the stack budget named", deref(st.LastError))
		}
	}
	runtime.ReadMemStats(&after)
	// Without the bound, wazero grows each of these stacks to about 50 MB (100 MB allocated
	// on the way); with it, the stack stays within its 1 MiB budget.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("the host allocated %d MiB for three runaway recursions", grew>>20)
	}
	t.Logf("host RSS %d KiB before, %d KiB after three runaway recursions", rssBefore, rss())
}

// rss is the process's resident set, in KiB (0 where /proc is missing).
func rss() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var n int
			for _, c := range strings.TrimSpace(v) {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}
