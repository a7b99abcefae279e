package plugin

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/abi"
)

// TestFailurePlugins runs each misbehaving plugin and checks the host's answer: the instance
// is discarded, the plugin named in the health condition, the host's HTTP API answering
// before, during and after.
func TestFailurePlugins(t *testing.T) {
	cases := []struct {
		id      string
		caps    []abi.Capability
		trigger string // HTTP path that makes it fail; "" fails in dev_init
		want    string // in last_error
	}{
		{id: "trapinit", want: "dev_init: trap"},
		{id: "badinit", want: "dev_init returned 7 and logged no reason"},
		{id: "refused", caps: []abi.Capability{abi.CapLog}, want: "sdk: register namespace: permission denied"},
		{id: "hog", want: "dev_init"},
		{id: "spin", caps: []abi.Capability{abi.CapHTTP}, trigger: "/spin/go", want: "time limit exceeded"},
		{id: "trapreq", caps: []abi.Capability{abi.CapHTTP}, trigger: "/trapreq/panic", want: "dev_event: trap"},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			h := newHarness(t, func(o *Options) {
				o.MemoryPages = 256 // 16 MiB: the hog reaches it quickly
				o.CallTimeout = 500 * time.Millisecond
				o.MaxFailures = 3
			})
			h.run()
			h.install(pack(t, manifest(tc.id, tc.caps...), loadKey(t, "publisher")), nil)
			if tc.trigger != "" {
				h.waitState(tc.id, StateRunning)
				// The host answers while the plugin misbehaves.
				var wg sync.WaitGroup
				wg.Add(1)
				var code int
				go func() {
					defer wg.Done()
					code, _ = h.do(http.MethodGet, tc.trigger, nil)
				}()
				for i := 0; i < 5; i++ {
					h.pingOK()
				}
				wg.Wait()
				if code != http.StatusInternalServerError && code != http.StatusServiceUnavailable {
					t.Errorf("request that broke the plugin answered %d, want 500 or 503", code)
				}
			}
			st := h.waitState(tc.id, StateFailed)
			if !strings.Contains(deref(st.LastError), tc.want) {
				t.Errorf("last_error %q, want it to contain %q", deref(st.LastError), tc.want)
			}
			if st.NextRetryS == nil || *st.NextRetryS != 1 {
				t.Errorf("next_retry_s %v, want 1", st.NextRetryS)
			}
			if st.Memory != 0 {
				t.Errorf("memory %d after the instance was discarded", st.Memory)
			}
			h.pingOK()
			c, ok := h.condition(HealthKey)
			if !ok || c.State != "warn" || !strings.Contains(c.Message, tc.id) {
				t.Errorf("health %+v, want warn naming %s", c, tc.id)
			}
			if c.RebootOnAlarm {
				t.Error("the plugins condition carries the reboot flag")
			}
		})
	}
}

// TestRestartBackoffAndDisable walks the restart policy transition by transition with the
// fake clock: failed → (1 s) loading → failed → (2 s) ... → disabled after MaxFailures; the
// disabled state survives a reboot; an operator start tries again from a zero count.
func TestRestartBackoffAndDisable(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxFailures = 3 })
	h.run()
	h.install(pack(t, manifest("trapinit"), loadKey(t, "publisher")), nil)
	for i, delay := range []time.Duration{time.Second, 2 * time.Second} {
		// A restart counts before its attempt fails: until then the state still shows the
		// previous failure, so wait for this attempt's count.
		waitFor(t, fmt.Sprintf("failure %d", i+1), func() bool {
			s, _ := h.m.Status("trapinit")
			return s.State == StateFailed && s.Failures == i+1
		})
		h.clk.Advance(delay - time.Millisecond)
		time.Sleep(20 * time.Millisecond)
		if st, _ := h.m.Status("trapinit"); st.State != StateFailed {
			t.Fatalf("restarted before the backoff of %v ended: %s", delay, st.State)
		}
		h.clk.Advance(time.Millisecond)
		waitFor(t, "restart", func() bool { s, _ := h.m.Status("trapinit"); return s.Restarts == uint64(i+1) })
	}
	st := h.waitState("trapinit", StateDisabled)
	if st.Wanted != WantDisabled || !strings.Contains(deref(st.LastError), "3 failures in a row") {
		t.Fatalf("disabled plugin: %+v", st)
	}
	// The state is published before the condition is updated: wait for the condition.
	waitFor(t, "the plugins condition in alarm naming the disabled plugin", func() bool {
		c, _ := h.condition(HealthKey)
		return c.State == "alarm" && strings.Contains(c.Message, "trapinit disabled")
	})
	h.clk.Advance(time.Hour)
	time.Sleep(20 * time.Millisecond)
	if st, _ := h.m.Status("trapinit"); st.State != StateDisabled {
		t.Fatalf("a disabled plugin restarted by itself: %s", st.State)
	}
	h.reboot()
	st = h.waitState("trapinit", StateDisabled)
	if !strings.Contains(deref(st.LastError), "failures in a row") {
		t.Fatalf("after a reboot the reason is lost: %+v", st)
	}
	code, body := h.do(http.MethodPost, "/plugins/trapinit/start", nil)
	if code != http.StatusOK {
		t.Fatalf("start: %d %s", code, body)
	}
	st = h.waitState("trapinit", StateFailed)
	if st.Failures != 1 {
		t.Fatalf("failures after an operator start: %d, want 1", st.Failures)
	}
}

// TestPermanentFailureDisablesAtOnce: a bundle whose signing key was removed cannot become
// loadable by waiting; the plugin is disabled at its next load.
func TestPermanentFailureDisablesAtOnce(t *testing.T) {
	h := newHarness(t)
	other := loadKey(t, "other")
	pemOther, _ := abi.MarshalPublicKey(&other.PublicKey)
	h.run()
	if code, body := h.do(http.MethodPost, "/plugins/keys", map[string]string{"pem": string(pemOther)}); code != http.StatusCreated {
		t.Fatalf("add key: %d %s", code, body)
	}
	res := h.install(pack(t, manifest("good"), other), nil)
	h.waitState("good", StateRunning)
	if code, body := h.do(http.MethodDelete, "/plugins/keys/"+res.KeyID, nil); code != http.StatusOK {
		t.Fatalf("remove key: %d %s", code, body)
	}
	h.reboot()
	st := h.waitState("good", StateDisabled)
	if st.Restarts != 0 || !strings.Contains(deref(st.LastError), "not in the trust store") {
		t.Fatalf("%+v", st)
	}
}

// TestStableRunResetsFailures: a plugin that ran for StableAfter starts its count afresh.
func TestStableRunResetsFailures(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("trapreq", abi.CapHTTP)
	h.do(http.MethodGet, "/trapreq/panic", nil)
	h.waitState("trapreq", StateFailed)
	h.clk.Advance(time.Second)
	h.waitState("trapreq", StateRunning)
	if st, _ := h.m.Status("trapreq"); st.Failures != 1 || st.Restarts != 1 {
		t.Fatalf("after one failure: %+v", st)
	}
	h.clk.Advance(DefaultStableAfter)
	waitFor(t, "failure count reset", func() bool { s, _ := h.m.Status("trapreq"); return s.Failures == 0 })
	// The next failure waits the shortest backoff again.
	h.do(http.MethodGet, "/trapreq/panic", nil)
	st := h.waitState("trapreq", StateFailed)
	if st.Failures != 1 || *st.NextRetryS != 1 {
		t.Fatalf("after a stable run: %+v", st)
	}
}

func TestBackoffSchedule(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		6: 32 * time.Second, 7: time.Minute, 40: time.Minute} {
		if got := backoff(time.Second, time.Minute, n); got != want {
			t.Errorf("backoff after %d failures: %v, want %v", n, got, want)
		}
	}
}

// TestMisbehavingHostCalls: pointers outside memory, malformed messages and an unknown log
// level answer invalid argument or limit exceeded; the plugin keeps running.
func TestMisbehavingHostCalls(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("garbage", abi.CapLog, abi.CapSKPublish)
	for _, want := range []string{"outside rc=-2", "malformed rc=-2", "huge rc=-4", "badlevel rc=-2"} {
		waitFor(t, want, func() bool { return h.logs.has(want) })
	}
	if len(h.sk.published()) != 0 {
		t.Fatal("a malformed publish reached Signal K")
	}
}

// TestNamespaces covers ns_register: a malformed descriptor and a foreign namespace are
// refused (flowConfig raised), a second registration in one instance conflicts, the 33rd
// namespace finds the table full, and a registration appears in the schema.
func TestNamespaces(t *testing.T) {
	h := newHarness(t)
	h.run()
	_, etag0 := h.cfg.Schema()
	h.start("badns", abi.CapLog, abi.CapConfig)
	waitFor(t, "bad descriptor refused", func() bool { return h.logs.has("bad descriptor rc=-2") })
	waitFor(t, "foreign namespace refused", func() bool { return h.logs.has("foreign namespace rc=-1") })
	if c, _ := h.condition("flowConfig"); c.State != "warn" {
		t.Fatalf("flowConfig %+v after a malformed descriptor", c)
	}

	// Fill the table to 31 from the device side; the plugin takes slot 32.
	for i := 0; i < 31; i++ {
		if _, err := h.rtns.RegisterJSON(fmt.Sprintf("x%d", i), []byte(`{"namespace":"","version":1,"title":"x","keys":[]}`)); err != nil {
			t.Fatal(err)
		}
	}
	h.start("good", abi.CapLog, abi.CapConfig)
	waitFor(t, "32nd namespace", func() bool { return h.logs.has("ns_register rc=0 plugin=good") })
	waitFor(t, "second registration", func() bool { return h.logs.has("second ns_register rc=-6 plugin=good") })
	schema, etag1 := h.cfg.Schema()
	if etag1 == etag0 || !strings.Contains(string(schema), "f_good") || !strings.Contains(string(schema), "x-dev-runtime") {
		t.Fatalf("schema after registration: etag %s→%s", etag0, etag1)
	}
	h.start("good2", abi.CapLog, abi.CapConfig)
	waitFor(t, "33rd namespace refused", func() bool { return h.logs.has("ns_register rc=-4 plugin=good2") })
	st, _ := h.m.Status("good")
	if st.Namespace == nil || *st.Namespace != "f_good" {
		t.Fatalf("namespace of good: %v", st.Namespace)
	}
	if st2, _ := h.m.Status("good2"); st2.Namespace != nil {
		t.Fatalf("good2 has a namespace: %v", *st2.Namespace)
	}
}

// TestRestartedInstanceKeepsNamespace: a restarted instance registering the same descriptor
// changes nothing (the schema's ETag stays) and finds its values in init.
func TestRestartedInstanceKeepsNamespace(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("good", abi.CapLog, abi.CapConfig, abi.CapHTTP)
	if err := h.cfg.Set("f_good", "greeting", "ahoy"); err != nil {
		t.Fatal(err)
	}
	_, etag := h.cfg.Schema()
	h.do(http.MethodGet, "/good/panic", nil)
	h.waitState("good", StateFailed)
	h.clk.Advance(time.Second)
	h.waitState("good", StateRunning)
	if _, e := h.cfg.Schema(); e != etag {
		t.Fatal("re-registering the same descriptor changed the schema")
	}
	code, body := h.do(http.MethodGet, "/good/info", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `ahoy`) {
		t.Fatalf("restarted instance's config: %d %s", code, body)
	}
}

// TestCallAfterStop: host functions of a discarded instance answer plugin stopped.
func TestCallAfterStop(t *testing.T) {
	h := newHarness(t)
	h.run()
	h.start("good", abi.CapLog, abi.CapSKPublish)
	s := h.m.get("good").currentSession()
	if s == nil {
		t.Fatal("no session")
	}
	if code, body := h.do(http.MethodPost, "/plugins/good/stop", nil); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	h.waitState("good", StateStopped)
	if !h.logs.has("stopping good") {
		t.Error("the stop event was not delivered")
	}
	for name, body := range map[string]hostFunc{"log": fnLog, "sk_publish": fnSKPublish, "power_hold": fnPowerHold} {
		if rc := s.invoke(abi.FunctionCapability[name], body, []uint64{0, 0, 0}); rc != int32(abi.ErrStopped) {
			t.Errorf("%s after stop: %d, want %d", name, rc, abi.ErrStopped)
		}
	}
	if rc := dispatch(t.Context(), abi.CapLog, fnLog, []uint64{0, 0, 0}); rc != int32(abi.ErrInternal) {
		t.Errorf("a call without a session: %d", rc)
	}
}

// TestBootLoadsInBackground: after a reboot the API answers while plugins are still loading.
func TestBootLoadsInBackground(t *testing.T) {
	h := newHarness(t)
	h.run()
	key := loadKey(t, "publisher")
	h.install(pack(t, manifest("good", abi.CapHTTP), key), nil)
	h.install(pack(t, manifest("other", abi.CapHTTP), key), nil)
	h.waitState("good", StateRunning)
	h.waitState("other", StateRunning)
	if code, _ := h.do(http.MethodPost, "/plugins/other/stop", nil); code != http.StatusOK {
		t.Fatal("stop other")
	}
	h.stop()
	h.boot()
	release := make(chan struct{})
	h.m.loadHook = func(string) { <-release }
	h.run()
	code, body := h.do(http.MethodGet, "/plugins", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /plugins while loading: %d", code)
	}
	doc := decode[ListDoc](t, body)
	states := map[string]State{}
	for _, p := range doc.Plugins {
		states[p.ID] = p.State
	}
	if states["good"] != StateLoading || states["other"] != StateStopped {
		t.Fatalf("states while loading: %v", states)
	}
	if code, _ := h.do(http.MethodGet, "/good/info", nil); code != http.StatusNotFound {
		t.Fatalf("a plugin route answered %d before the plugin loaded", code)
	}
	close(release)
	h.waitState("good", StateRunning)
	if code, _ := h.do(http.MethodGet, "/good/info", nil); code != http.StatusOK {
		t.Fatalf("plugin route after loading: %d", code)
	}
}

// TestCompileCacheSurvivesReboot: the compiled code is kept in the partition; a reboot
// loads it instead of compiling again (no new cache entry appears).
func TestCompileCacheSurvivesReboot(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.CacheDir = "" })
	h.run()
	h.start("good")
	cache := filepath.Join(h.opts.Dir, cacheDir)
	before := listFiles(t, cache)
	if len(before) == 0 {
		t.Fatal("no compiled code in the cache")
	}
	h.reboot()
	h.waitState("good", StateRunning)
	after := listFiles(t, cache)
	if strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("cache changed across a reboot: %v → %v", before, after)
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShutdownDuringCall: the device shutting down while a plugin is inside a call cuts the
// call and never enters the closed instance again (its memory is gone: entering it would
// crash the host).
func TestShutdownDuringCall(t *testing.T) {
	// The call's timeout is far beyond hangGuard: a shutdown that waited for it would fail
	// h.stop's guard, so no reading of the clock is needed to tell the two apart.
	h := newHarness(t, func(o *Options) { o.CallTimeout = 10 * hangGuard })
	h.run()
	h.start("spin", abi.CapHTTP)
	p := h.m.get("spin")
	go func() { h.do(http.MethodGet, "/spin/x", nil) }()
	waitCallInProgress(t, p)
	s := p.currentSession()
	h.stop()
	if t.Failed() {
		t.FailNow()
	}
	if _, err := s.call(t.Context(), abi.ExportEvent, nil, true); err == nil {
		t.Fatal("a call entered a closed instance")
	}
}
