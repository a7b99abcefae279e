package plugin

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/health"
	"devhost/plugins"
)

// The SDK's test plugins (plugins/testdata), built once per test binary, two at a time.
var (
	guestOnce sync.Once
	guestMods map[string][]byte
	guestErr  error
)

var guestNames = []string{"trapinit", "badinit", "loop", "memhog", "garbage", "badns", "ns", "nocaps", "afterstop", "bench"}

func guestModule(t testing.TB, name string) ([]byte, abi.Manifest) {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles the SDK's test plugins for wasip1 with the Go toolchain")
	}
	guestOnce.Do(func() {
		guestMods = map[string][]byte{}
		var mu sync.Mutex
		sem := make(chan struct{}, 2)
		var wg sync.WaitGroup
		for _, n := range guestNames {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				out := filepath.Join(tmpRoot, n+".wasm")
				err := plugins.Build(context.Background(), "testdata/"+n, out)
				var b []byte
				if err == nil {
					b, err = readFile(out)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil && guestErr == nil {
					guestErr = err
				}
				guestMods[n] = b
			}()
		}
		wg.Wait()
	})
	if guestErr != nil {
		t.Fatal(guestErr)
	}
	_, m, err := plugins.Manifest("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return guestMods[name], m
}

func packGuest(t testing.TB, name string, edit func(*abi.Manifest)) []byte {
	t.Helper()
	mod, m := guestModule(t, name)
	if edit != nil {
		edit(&m)
	}
	b, err := abi.Pack(m, mod, loadKey(t, "publisher"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGuestFailures runs the SDK's misbehaving plugins: each fails as its README says and the
// host keeps answering.
func TestGuestFailures(t *testing.T) {
	cases := []struct {
		name, trigger, want string
	}{
		{"trapinit", "", "dev_init: trap"},
		{"badinit", "", "dev_init returned 42 and logged no reason"},
		{"loop", "/loop/spin", "time limit exceeded"},
		{"memhog", "/memhog/eat", "dev_event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.CallTimeout = 500 * time.Millisecond; o.MemoryPages = 256 })
			h.run()
			h.install(packGuest(t, tc.name, nil), nil)
			if tc.trigger != "" {
				h.waitState(tc.name, StateRunning)
				done := make(chan int, 1)
				go func() { c, _ := h.do(http.MethodGet, tc.trigger, nil); done <- c }()
				for i := 0; i < 5; i++ {
					h.pingOK()
				}
				if c := <-done; c < 500 {
					t.Errorf("the failing request answered %d", c)
				}
			}
			st := h.waitState(tc.name, StateFailed)
			if !strings.Contains(deref(st.LastError), tc.want) {
				t.Errorf("last_error %q, want %q", deref(st.LastError), tc.want)
			}
			h.clk.Advance(time.Second)
			waitFor(t, "restart", func() bool { s, _ := h.m.Status(tc.name); return s.Restarts == 1 })
			h.pingOK()
		})
	}
}

func TestGuestGarbage(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.install(packGuest(t, "garbage", nil), nil)
	h.waitState("garbage", StateRunning)
	re := regexp.MustCompile(`^garbage: (\w+)((?: -?\d+)+)`)
	waitFor(t, "garbage lines", func() bool { return h.logs.has("garbage: event_read") })
	n := 0
	for _, l := range h.logLines("garbage: ") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q", l)
		}
		for _, rc := range strings.Fields(m[2]) {
			if rc != "-2" && rc != "-4" {
				t.Errorf("%s answered %s", m[1], rc)
			}
		}
		n++
	}
	if n != 8 {
		t.Fatalf("%d garbage lines, want 8", n)
	}
	if len(h.sk.published()) != 0 || len(h.events.named("garbage")) != 0 {
		t.Fatal("garbage had an effect")
	}
	st, _ := h.m.Status("garbage")
	if st.Errors < 21 {
		t.Fatalf("errors %d: the malformed calls were not counted", st.Errors)
	}
	// dev_event answers 7: counted, the instance kept.
	before := st.Errors
	h.do(http.MethodGet, "/garbage", nil)
	waitFor(t, "dev_event error counted", func() bool {
		s, _ := h.m.Status("garbage")
		return s.Errors > before && strings.Contains(deref(s.LastError), "returned 7")
	})
	if st, _ := h.m.Status("garbage"); st.State != StateRunning || st.Restarts != 0 {
		t.Fatalf("%+v", st)
	}
}

func (h *harness) logLines(prefix string) []string {
	h.logs.mu.Lock()
	defer h.logs.mu.Unlock()
	var out []string
	for _, l := range h.logs.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func TestGuestNamespaces(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var raised []string
	if err := h.health.AddSink(func(c health.Condition) {
		if c.Key == "flowConfig" && c.State == health.Warn {
			mu.Lock()
			raised = append(raised, c.Message)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	h.run()
	h.install(packGuest(t, "badns", nil), nil)
	h.waitState("badns", StateRunning)
	want := "badns: malformed=invalid argument foreign=permission denied core=permission denied valid=ok duplicate=conflict"
	waitFor(t, want, func() bool { return h.logs.has(want) })
	mu.Lock()
	if len(raised) != 1 || !strings.Contains(raised[0], `"badns"`) {
		t.Fatalf("flowConfig raised %q, want once for badns's malformed descriptor", raised)
	}
	mu.Unlock()
	// 32 slots: the ns plugin under 33 ids; each registers, is stopped (its namespace stays
	// while installed), and the 33rd finds the table full.
	// badns holds one slot already.
	for i := 1; i <= 32; i++ {
		id := fmt.Sprintf("ns%d", i)
		h.install(packGuest(t, "ns", func(m *abi.Manifest) { m.ID = id }), nil)
		h.waitState(id, StateRunning)
		waitFor(t, id+" registered", func() bool {
			return h.logs.has("ns: registered plugin="+id) || h.logs.has("limit exceeded plugin="+id)
		})
		if _, err := h.m.Stop(id); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 31; i++ {
		if !h.logs.has(fmt.Sprintf("ns: registered plugin=ns%d", i)) {
			t.Errorf("ns%d was refused", i)
		}
	}
	if !h.logs.has("limit exceeded plugin=ns32") {
		t.Error("the 33rd namespace was not refused with limit exceeded")
	}
	if c, _ := h.condition("flowConfig"); c.State != "warn" || !strings.Contains(c.Message, "ns32") {
		t.Errorf("flowConfig %+v", c)
	}
	h.pingOK()
}

func TestGuestNoCaps(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.install(packGuest(t, "nocaps", nil), []abi.Capability{abi.CapLog})
	h.waitState("nocaps", StateRunning)
	waitFor(t, "nocaps lines", func() bool { return h.logs.has("nocaps: ") })
	calls, open := 0, 0
	for _, l := range h.logLines("nocaps: ") {
		for _, item := range strings.Fields(strings.TrimPrefix(l, "nocaps:")) {
			fn, rc, _ := strings.Cut(item, "=")
			if strings.Contains(rc, " ") {
				rc, _, _ = strings.Cut(rc, " ")
			}
			calls++
			switch fn {
			case abi.FnEventRead, abi.FnDormant:
				// Neither needs a capability (dormant's empty input is refused as malformed).
				if rc == "-1" {
					t.Errorf("%s denied", fn)
				}
				calls--
				open++
			case "plugin":
				calls--
			default:
				if rc != "-1" {
					t.Errorf("%s answered %s without its capability", fn, rc)
				}
			}
		}
	}
	st, _ := h.m.Status("nocaps")
	if calls+open != len(abi.Signatures)-1 || st.Denied != uint64(calls) {
		t.Fatalf("%d calls, denied %d", calls, st.Denied)
	}
}

// TestGuestAfterStop: stopped during a call, the plugin's later host calls answer plugin
// stopped and take no effect; its timers never fire.
func TestGuestAfterStop(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.CallTimeout = 30 * time.Second })
	h.run()
	h.install(packGuest(t, "afterstop", nil), nil)
	h.waitState("afterstop", StateRunning)
	p := h.m.get("afterstop")
	done := make(chan int, 1)
	go func() { c, _ := h.do(http.MethodGet, "/afterstop/run", nil); done <- c }()
	waitCallInProgress(t, p)
	if _, err := h.m.Stop("afterstop"); err != nil {
		t.Fatal(err)
	}
	<-done
	h.waitState("afterstop", StateStopped)
	h.clk.Advance(time.Second)
	time.Sleep(20 * time.Millisecond)
	for _, v := range h.sk.published() {
		if v.Path == "afterstop.value" && v.Value == float64(2) {
			t.Fatal("a call after the stop took effect")
		}
	}
	if h.logs.has("afterstop: still running") {
		t.Fatal("the plugin logged after its stop")
	}
	h.pingOK()
}

func readFile(p string) ([]byte, error) { return osReadFile(p) }
