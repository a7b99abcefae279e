package config

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// migNS is a namespace at version 3: step 2 renames "old" to "new" (doubling it), step 3 is
// additive unless fail3 is set.
func migNS(fail3 *bool, calls *[]int) Namespace {
	return Namespace{
		Name: "m", Version: 3, Title: "Migrated",
		Keys: []Key{{Name: "new", Type: TypeInt, Default: 1}, {Name: "extra", Type: TypeBool, Default: false}},
		Steps: map[int]Step{
			2: func(m *Migration) error {
				*calls = append(*calls, 2)
				raw, ok := m.Raw("old")
				if !ok {
					return nil
				}
				var n int
				if err := json.Unmarshal(raw, &n); err != nil {
					return err
				}
				if err := m.Set("new", n*2); err != nil {
					return err
				}
				m.Delete("old")
				return nil
			},
			3: func(m *Migration) error {
				*calls = append(*calls, 3)
				if *fail3 {
					return errors.New("not today")
				}
				return nil
			},
		},
	}
}

// TestVersioningTable walks the spec's start-up table row by row.
func TestVersioningTable(t *testing.T) {
	cases := []struct {
		name       string
		seed       map[string]string // stored before the boot, under cfg/m/
		fail3      bool
		wantStored map[string]string
		wantCalls  []int
		wantLog    string
	}{
		{name: "absent: stamp", seed: map[string]string{"old": "4"},
			wantStored: map[string]string{"config_version": "3", "old": "4"}},
		{name: "corrupt: re-stamp", seed: map[string]string{"config_version": "x1", "old": "4"},
			wantStored: map[string]string{"config_version": "3", "old": "4"}, wantLog: "re-stamped"},
		{name: "wrong type: re-stamp", seed: map[string]string{"config_version": `"1"`},
			wantStored: map[string]string{"config_version": "3"}, wantLog: "re-stamped"},
		{name: "zero: re-stamp", seed: map[string]string{"config_version": "0"},
			wantStored: map[string]string{"config_version": "3"}, wantLog: "re-stamped"},
		{name: "equal: nothing", seed: map[string]string{"config_version": "3", "old": "4"},
			wantStored: map[string]string{"config_version": "3", "old": "4"}},
		{name: "older: steps run in order", seed: map[string]string{"config_version": "1", "old": "4"},
			wantStored: map[string]string{"config_version": "3", "new": "8"}, wantCalls: []int{2, 3}, wantLog: "migrated"},
		{name: "older by one: last step only", seed: map[string]string{"config_version": "2", "old": "4"},
			wantStored: map[string]string{"config_version": "3", "old": "4"}, wantCalls: []int{3}},
		{name: "failing step stops the chain after stamping the previous", seed: map[string]string{"config_version": "1", "old": "4"},
			fail3: true, wantStored: map[string]string{"config_version": "2", "new": "8"}, wantCalls: []int{2, 3}, wantLog: "retried at next boot"},
		{name: "newer: left alone with a warning", seed: map[string]string{"config_version": "9", "old": "4"},
			wantStored: map[string]string{"config_version": "9", "old": "4"}, wantLog: "newer than this firmware"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testNS())
			for k, v := range tc.seed {
				if err := f.st.Set(storeKey("m", k), v); err != nil {
					t.Fatal(err)
				}
			}
			fail3 := tc.fail3
			var calls []int
			f.reopen(t, testNS(), migNS(&fail3, &calls))
			got := map[string]string{}
			for k, v := range f.stored(t) {
				if rest, ok := strings.CutPrefix(k, "cfg/m/"); ok {
					got[rest] = v
				}
			}
			if !maps.Equal(got, tc.wantStored) {
				t.Fatalf("stored %q, want %q", got, tc.wantStored)
			}
			if !slicesEqual(calls, tc.wantCalls) {
				t.Fatalf("steps run %v, want %v", calls, tc.wantCalls)
			}
			if tc.wantLog != "" && !strings.Contains(f.log.String(), tc.wantLog) {
				t.Fatalf("log lacks %q:\n%s", tc.wantLog, f.log.String())
			}
			if _, has := mustDoc(t, f.c)["m"]["config_version"]; has {
				t.Fatal("config_version shows in GET /config")
			}
		})
	}
}

// TestFailingStepRetriedNextBoot: the chain resumes at the failed step on the next boot.
func TestFailingStepRetriedNextBoot(t *testing.T) {
	f := newFixture(t, testNS())
	_ = f.st.Set(storeKey("m", VersionKey), "1")
	_ = f.st.Set(storeKey("m", "old"), "5")
	fail3 := true
	var calls []int
	f.reopen(t, migNS(&fail3, &calls))
	if v, _, _ := f.st.Get(storeKey("m", VersionKey)); v != "2" {
		t.Fatalf("after a failing step 3 the version is %q, want 2", v)
	}
	if f.c.Int("m", "new") != 10 {
		t.Fatalf("step 2's result not kept: new = %d", f.c.Int("m", "new"))
	}
	fail3 = false
	calls = nil
	f.reopen(t, migNS(&fail3, &calls))
	if v, _, _ := f.st.Get(storeKey("m", VersionKey)); v != "3" {
		t.Fatalf("retry did not complete: version %q", v)
	}
	if !slicesEqual(calls, []int{3}) {
		t.Fatalf("retry ran steps %v, want [3] only", calls)
	}
	if f.c.Int("m", "new") != 10 {
		t.Fatalf("new = %d after the retry", f.c.Int("m", "new"))
	}
}

// TestStepWritesAreAtomic: a step whose result cannot be written leaves the old layout whole.
func TestStepWritesAreAtomic(t *testing.T) {
	f := newFixture(t, testNS())
	_ = f.st.Set(storeKey("m", VersionKey), "1")
	_ = f.st.Set(storeKey("m", "old"), "5")
	f.st.FailWritesForTest(errors.New("flash gone"))
	fail3 := false
	var calls []int
	f.reopen(t, migNS(&fail3, &calls))
	f.st.FailWritesForTest(nil)
	got := f.stored(t)
	if got["cfg/m/config_version"] != "1" || got["cfg/m/old"] != "5" || got["cfg/m/new"] != "" {
		t.Fatalf("failed migration write left %q", got)
	}
	if !strings.Contains(f.log.String(), "migration write failed") {
		t.Fatalf("log lacks the failure:\n%s", f.log.String())
	}
}

func TestStepPanicIsAFailure(t *testing.T) {
	f := newFixture(t, testNS())
	_ = f.st.Set(storeKey("p", VersionKey), "1")
	ns := Namespace{Name: "p", Version: 2, Title: "P", Keys: []Key{{Name: "a", Type: TypeBool, Default: true}},
		Steps: map[int]Step{2: func(*Migration) error { panic("bug") }}}
	f.reopen(t, ns)
	if v, _, _ := f.st.Get(storeKey("p", VersionKey)); v != "1" {
		t.Fatalf("version %q after a panicking step, want 1", v)
	}
}

func TestAdditiveStepsOnlyStamp(t *testing.T) {
	f := newFixture(t, testNS())
	_ = f.st.Set(storeKey("a", VersionKey), "1")
	_ = f.st.Set(storeKey("a", "x"), "3")
	ns := Namespace{Name: "a", Version: 3, Title: "A", Keys: []Key{{Name: "x", Type: TypeInt, Default: 1}},
		Steps: map[int]Step{2: nil}}
	f.reopen(t, ns)
	if v, _, _ := f.st.Get(storeKey("a", VersionKey)); v != "3" {
		t.Fatalf("version %q, want 3", v)
	}
	if f.c.Int("a", "x") != 3 {
		t.Fatal("an additive bump touched a value")
	}
}

// TestSKSchemeMigration is the spec's sk v1 -> v2 step: boolean sk.tls becomes sk.scheme.
func TestSKSchemeMigration(t *testing.T) {
	cases := []struct {
		tls        string // stored sk.tls, "" for absent
		wantScheme string
		stored     bool // whether sk.scheme is stored after the step
	}{
		{"true", "https", true},
		{"false", "auto", true},
		{`"yes"`, "auto", true},
		{"1", "auto", true},
		{"", "auto", false},
	}
	for _, tc := range cases {
		t.Run(tc.tls, func(t *testing.T) {
			f := newFixture(t, testNS())
			_ = f.st.Set(storeKey("sk", VersionKey), "1")
			_ = f.st.Set(storeKey("sk", "server_port"), "3000")
			if tc.tls != "" {
				_ = f.st.Set(storeKey("sk", "tls"), tc.tls)
			}
			f.reopen(t, Builtin()...)
			if got := f.c.String("sk", "scheme"); got != tc.wantScheme {
				t.Fatalf("sk.scheme = %q, want %q", got, tc.wantScheme)
			}
			st := f.stored(t)
			if _, has := st["cfg/sk/tls"]; has {
				t.Fatal("the old sk.tls is still stored")
			}
			if _, has := st["cfg/sk/scheme"]; has != tc.stored {
				t.Fatalf("sk.scheme stored = %v, want %v", has, tc.stored)
			}
			if st["cfg/sk/config_version"] != "2" || f.c.Int("sk", "server_port") != 3000 {
				t.Fatalf("after migration: %q", st)
			}
			if _, err := f.c.Get("sk", "tls"); err == nil {
				t.Fatal("sk.tls is still a key")
			}
		})
	}
}

// TestWifiHostnameMove: at every boot a stored wifi.hostname moves to net.hostname.
func TestWifiHostnameMove(t *testing.T) {
	cases := []struct {
		name     string
		wifi     string // stored wifi.hostname raw, "" absent
		net      string // stored net.hostname raw, "" absent
		wantNet  string
		wantLog  string
		noChange bool
	}{
		{name: "moved when net is empty", wifi: `"boat-1"`, wantNet: "boat-1", wantLog: "deprecated key moved"},
		{name: "moved over an explicitly empty net", wifi: `"boat-1"`, net: `""`, wantNet: "boat-1", wantLog: "deprecated key moved"},
		{name: "moved over a set net: the later value wins", wifi: `"boat-1"`, net: `"mast"`, wantNet: "boat-1", wantLog: "deprecated key moved"},
		{name: "dropped when too long for net", wifi: `"` + strings.Repeat("a", 33) + `"`, wantNet: "", noChange: true},
		{name: "dropped when not a DNS label", wifi: `"boat 1"`, net: `"mast"`, wantNet: "mast", wantLog: "does not fit the successor"},
		{name: "empty is cleared", wifi: `""`, wantNet: "", noChange: true},
		{name: "absent: nothing", wantNet: "", noChange: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testNS())
			if tc.wifi != "" {
				_ = f.st.Set(storeKey("wifi", "hostname"), tc.wifi)
			}
			if tc.net != "" {
				_ = f.st.Set(storeKey("net", "hostname"), tc.net)
			}
			f.reopen(t, Builtin()...)
			if got := f.c.String("net", "hostname"); got != tc.wantNet {
				t.Fatalf("net.hostname = %q, want %q", got, tc.wantNet)
			}
			if got := f.c.String("wifi", "hostname"); got != "" {
				t.Fatalf("wifi.hostname reads %q after boot, want empty", got)
			}
			if _, has := f.stored(t)["cfg/wifi/hostname"]; has {
				t.Fatal("wifi.hostname still stored after boot")
			}
			if tc.wantLog != "" && !strings.Contains(f.log.String(), tc.wantLog) {
				t.Fatalf("log lacks %q:\n%s", tc.wantLog, f.log.String())
			}
		})
	}
	// A value written later reads back until the next boot, then moves.
	f := newFixture(t)
	f.put(t, `{"wifi":{"hostname":"later"}}`)
	if f.c.String("wifi", "hostname") != "later" || f.c.String("net", "hostname") != "" {
		t.Fatal("a written wifi.hostname moved before the next boot")
	}
	f.reopen(t, append(Builtin(), testNS())...)
	if f.c.String("net", "hostname") != "later" || f.c.String("wifi", "hostname") != "" {
		t.Fatal("wifi.hostname written later was not moved at the next boot")
	}
	// Written again while net.hostname is set, it still moves at the next boot.
	f.put(t, `{"wifi":{"hostname":"again"}}`)
	f.reopen(t, append(Builtin(), testNS())...)
	if f.c.String("net", "hostname") != "again" || f.c.String("wifi", "hostname") != "" {
		t.Fatalf("wifi.hostname written over a set net.hostname: net %q, wifi %q", f.c.String("net", "hostname"), f.c.String("wifi", "hostname"))
	}
	// net.hostname written after it drops the pending value: the later one wins, and the
	// answer says wifi.hostname changed (it reads back empty from then on).
	f.put(t, `{"wifi":{"hostname":"old-tool"}}`)
	res, err := f.c.Apply([]byte(`{"net":{"hostname":"new-ui"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{"net.hostname", "wifi.hostname"}) {
		t.Fatalf("changed %v", res.Changed)
	}
	if f.c.String("wifi", "hostname") != "" {
		t.Fatal("wifi.hostname still pending after net.hostname was written")
	}
	f.reopen(t, append(Builtin(), testNS())...)
	if f.c.String("net", "hostname") != "new-ui" {
		t.Fatalf("net.hostname = %q after boot, want the later new-ui", f.c.String("net", "hostname"))
	}
}

func TestMovesToMustResolve(t *testing.T) {
	ns := Namespace{Name: "a", Version: 1, Title: "A", Keys: []Key{{Name: "x", Type: TypeString, Default: "", MovesTo: "b.y"}}}
	f := newFixture(t, testNS())
	if _, err := New(f.st, nil, ns); err == nil {
		t.Fatal("MovesTo to a missing key accepted")
	}
	ns.Keys[0].MovesTo = "a.x"
	if _, err := New(f.st, nil, ns); err == nil {
		t.Fatal("MovesTo to itself accepted")
	}
}

func mustDoc(t *testing.T, c *Config) map[string]map[string]any {
	t.Helper()
	b, err := c.Document("")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
