package plugin

import (
	"net/http"
	"strings"
	"testing"

	"devhost/abi"
)

// count is how often sub occurs in the captured log.
func (c *logCapture) count(sub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Count(strings.Join(c.lines, "\n"), sub)
}

// waitAsleep waits until plugin id is dormant with its memory released, moving the fake
// clock on so that the linger after its last request passes.
func (h *harness) waitAsleep(id string) {
	h.t.Helper()
	waitFor(h.t, id+" asleep", func() bool {
		h.clk.Advance(requestLinger / 8)
		s, _ := h.m.Status(id)
		return s.State == StateDormant && s.Memory == 0
	})
}

// A plugin that asks to be dormant is closed once idle: its namespace stays served, a
// request to its routes wakes it and is answered, a reboot keeps it dormant without starting
// it, and a write to a key it sleeps on wakes it for good.
func TestDormantPlugin(t *testing.T) {
	h := newHarness(t)
	h.cfg.OnChange(func(ns, key string) { h.m.ConfigChanged(ns, key) })
	h.run()
	h.install(pack(t, manifest("sleepy", abi.CapConfig, abi.CapLog, abi.CapHTTP), loadKey(t, "publisher")), nil)
	st := h.waitState("sleepy", StateDormant)
	if st.Wake == nil || string(st.Wake.Config["level"]) != "3" || st.Namespace == nil || st.Memory != 0 {
		t.Fatalf("dormant status: wake %v namespace %v memory %d", st.Wake, st.Namespace, st.Memory)
	}
	for _, want := range []string{"no condition rc=-2", "unknown key rc=-2", "button rc=-1", "holds now rc=-5", "dormant rc=0"} {
		if !h.logs.has(want) {
			t.Errorf("log %q missing", want)
		}
	}
	if h.logs.count("stopping sleepy") != 1 {
		t.Error("the instance was not stopped in order")
	}

	// Its configuration is served and written while it sleeps; a key it does not sleep on
	// leaves it asleep.
	if err := h.cfg.Set("f_sleepy", "greeting", "ahoy"); err != nil {
		t.Fatal(err)
	}
	if v, err := h.cfg.Get("f_sleepy", "greeting"); err != nil || v != "ahoy" {
		t.Fatalf("f_sleepy.greeting while dormant: %v %v", v, err)
	}

	// A request wakes it; the new instance answers it, then sleeps again.
	code, body := h.do(http.MethodGet, "/sleepy/x", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `\"greeting\":\"ahoy\"`) {
		t.Fatalf("GET /sleepy/x while dormant: %d %s", code, body)
	}
	// It stays a while after the request (a page polling it would reload it every time).
	h.clk.Advance(requestLinger / 2)
	if s, _ := h.m.Status("sleepy"); s.State != StateRunning {
		t.Fatalf("%s right after a request", s.State)
	}
	h.waitAsleep("sleepy")
	if n := h.logs.count("started sleepy"); n != 2 {
		t.Fatalf("%d starts, want 2", n)
	}

	// A reboot registers the namespace from the record and does not start the plugin.
	h.reboot()
	h.cfg.OnChange(func(ns, key string) { h.m.ConfigChanged(ns, key) })
	h.waitState("sleepy", StateDormant)
	if v, err := h.cfg.Get("f_sleepy", "greeting"); err != nil || v != "ahoy" {
		t.Fatalf("f_sleepy.greeting after a reboot: %v %v", v, err)
	}
	if n := h.logs.count("started sleepy"); n != 2 {
		t.Fatalf("the reboot started the dormant plugin (%d starts)", n)
	}

	// Its wake key changes: it starts and stays running.
	if err := h.cfg.Set("f_sleepy", "level", 5); err != nil {
		t.Fatal(err)
	}
	h.waitState("sleepy", StateRunning)
	code, body = h.do(http.MethodGet, "/sleepy/x", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `\"level\":5`) {
		t.Fatalf("GET /sleepy/x awake: %d %s", code, body)
	}
	if s, _ := h.m.Status("sleepy"); s.State != StateRunning || s.Wake != nil {
		t.Fatalf("awake: %s %v", s.State, s.Wake)
	}

	// Back to 3: it asks again and sleeps (once the request above is a minute old); an
	// operator's stop takes its routes away.
	if err := h.cfg.Set("f_sleepy", "level", 3); err != nil {
		t.Fatal(err)
	}
	h.waitAsleep("sleepy")
	if _, err := h.m.Stop("sleepy"); err != nil {
		t.Fatal(err)
	}
	h.waitState("sleepy", StateStopped)
	if code, _ := h.do(http.MethodGet, "/sleepy/x", nil); code != http.StatusNotFound {
		t.Fatalf("GET /sleepy/x of a stopped plugin: %d", code)
	}
}

// A press of the button while a dormant plugin loads (woken by a request) reaches the new
// instance: the watch that was to wake the plugin stays until the instance's init is over.
func TestDormantButtonPressWhileWaking(t *testing.T) {
	h, _, _, fb := periphHarness(t)
	h.install(pack(t, manifest("napper", abi.CapLog, abi.CapButton, abi.CapHTTP), loadKey(t, "publisher")), nil)
	h.waitState("napper", StateDormant)
	if !h.logs.has("nap rc=0") {
		t.Fatal("the dormant request was refused")
	}
	loading, release := make(chan struct{}), make(chan struct{})
	h.m.startHook = func(string) { close(loading); <-release }
	answered := make(chan int, 1)
	go func() {
		code, _ := h.do(http.MethodGet, "/napper/x", nil)
		answered <- code
	}()
	<-loading
	pressed := fb.press(3)
	close(release)
	if !pressed {
		t.Fatal("nothing watched the button while the plugin loaded")
	}
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("GET /napper/x: %d", code)
	}
	waitFor(t, "the press reaching the new instance", func() bool { return h.logs.has("napper pressed rc=0") })
	h.waitState("napper", StateRunning)
	if fb.press(1) {
		t.Error("the carried watch outlived the load of an instance that does not watch the button")
	}
}
