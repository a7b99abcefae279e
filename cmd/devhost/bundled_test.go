package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/plugins"
)

// bundledBuild is what `make build` makes of the bundled plugins (n2k, ble) and cmd/devhost,
// built once for the tests that need it: the n2k module, the development key that signed
// the bundles, and a devhost carrying them, with the race detector (bin) and without (plain:
// the device compiles the 9 MB ble module at every first boot, minutes under the race
// detector on a loaded machine, seconds without).
type bundledBuild struct {
	wasm, keys, bin, plain string
}

// bundledIDs are the Makefile's BUNDLED_PLUGINS.
var bundledIDs = []string{"n2k", "ble"}

var (
	bundledOnce sync.Once
	bundled     bundledBuild
	bundledErr  error
)

func buildBundled(t *testing.T) bundledBuild {
	t.Helper()
	bundledOnce.Do(func() { bundled, bundledErr = makeBundled() })
	if bundledErr != nil {
		t.Fatal(bundledErr)
	}
	return bundled
}

func makeBundled() (bundledBuild, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	// Beside the binaries TestMain built: removed with them.
	work, err := os.MkdirTemp(filepath.Dir(binary), "bundled")
	if err != nil {
		return bundledBuild{}, err
	}
	b := bundledBuild{wasm: filepath.Join(work, "n2k.wasm"), keys: filepath.Join(work, "keys"), bin: filepath.Join(work, "devhost")}
	run := func(env []string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	// What make build does, with the test's own development key and, instead of writing into
	// the source tree, the bundles laid over the embedded folder.
	dist := filepath.Join(plugins.Dir(), "..", "host", "plugin", "bundled", "dist")
	replace := map[string]string{}
	others, _ := filepath.Glob(filepath.Join(dist, "*.devplug"))
	for _, o := range others {
		replace[o] = "" // another build's bundles are not these tests'
	}
	for _, id := range bundledIDs {
		wasm := filepath.Join(work, id+".wasm")
		if id == "n2k" {
			wasm = b.wasm
		}
		if err := plugins.Build(ctx, id, wasm); err != nil {
			return b, err
		}
		bundle := filepath.Join(work, id+".devplug")
		if err := run([]string{"DEVHOST_KEYS=" + b.keys}, devctl, "plugin", "pack",
			"--manifest", filepath.Join(plugins.Dir(), id, "manifest.json"), "--wasm", wasm, "--out", bundle); err != nil {
			return b, err
		}
		replace[filepath.Join(dist, id+".devplug")] = bundle
	}
	ov, _ := json.Marshal(map[string]any{"Replace": replace})
	overlay := filepath.Join(work, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return b, err
	}
	b.plain = filepath.Join(work, "devhost-plain")
	if err := run(nil, "go", "build", "-tags", "bundled", "-overlay", overlay, "-o", b.plain, "."); err != nil {
		return b, err
	}
	return b, run(nil, "go", "build", "-race", "-tags", "bundled", "-overlay", overlay, "-o", b.bin, ".")
}

// A device built as `make build` builds it carries plugins/n2k: a fresh device lists it
// dormant (f_n2k.enabled false: no instance until enabled; GET /n2k/status wakes it to
// answer); a removal lasts across reboots; a factory reset brings it back.
func TestBundledN2KPluginOnAFreshDevice(t *testing.T) {
	b := buildBundled(t)
	bin, keys := b.bin, b.keys
	d := newDev(t, withBinary(bin), withEnv("DEVHOST_KEYS="+keys))
	_, man, err := plugins.Manifest("n2k")
	if err != nil {
		t.Fatal(err)
	}
	// n2k is the plugin as GET /plugins lists it (nil: not listed) and whether the device is
	// still offering its carried bundles (which it does after answering).
	n2k := func() (map[string]any, bool) {
		t.Helper()
		doc := getDoc[struct {
			Plugins        []map[string]any
			BundledPending *bool `json:"bundled_pending"`
		}](d, "/api/v1/plugins")
		if doc.BundledPending == nil {
			t.Fatalf("plugins without bundled_pending: %+v", doc)
		}
		for _, p := range doc.Plugins {
			if p["id"] == "n2k" {
				return p, *doc.BundledPending
			}
		}
		return nil, *doc.BundledPending
	}
	// offered is n2k once the offer is over.
	offered := func() map[string]any {
		t.Helper()
		deadline := time.Now().Add(hangGuard)
		for {
			p, pending := n2k()
			if !pending {
				return p
			}
			if time.Now().After(deadline) {
				t.Fatal("the carried bundles are still being offered")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitIdle := func(when string) {
		t.Helper()
		deadline := time.Now().Add(hangGuard)
		for {
			p, pending := n2k()
			if p == nil && !pending {
				t.Fatalf("%s: n2k not installed", when)
			}
			if p == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if p["state"] == "dormant" { // idle: closed until f_n2k.enabled changes
				if p["version"] != man.Version || p["wanted"] != "running" {
					t.Fatalf("%s: n2k %v %v", when, p["version"], p["wanted"])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: n2k %v, never running", when, p["state"])
			}
			time.Sleep(100 * time.Millisecond)
		}
		st := d.callWaking("GET", "/api/v1/n2k/status", "") // wakes the dormant plugin
		if st.status != 200 {
			t.Fatalf("%s: n2k status %d %s", when, st.status, st.body)
		}
		if m := st.json(t); m["state"] != "disabled" || m["address"] != nil || m["frames_out"] != 0.0 {
			t.Fatalf("%s: not idle: %s", when, st.body)
		}
		if cfg := d.config("f_n2k"); cfg["enabled"] != false {
			t.Fatalf("%s: f_n2k %v", when, cfg)
		}
	}
	waitIdle("first boot")

	// The namespace's ranges: a bad value is a 400 naming the key; nothing is stored.
	for _, c := range []struct{ key, value string }{
		{"rate_ms", "-1"}, {"rate_ms", "60001"}, {"manufacturer", "2048"}, {"device_function", "256"},
		{"device_class", "128"}, {"device_instance", "256"}, {"system_instance", "16"},
		{"industry_group", "8"}, {"unique_number", "2097152"}, {"address", "252"}, {"rate_ms", `"fast"`},
		{"path_overrides", `"` + strings.Repeat("x", 4000) + `"`},
	} {
		r := d.call("PUT", "/api/v1/config", `{"f_n2k":{"`+c.key+`":`+c.value+`}}`)
		if m := r.json(t); r.status != 400 || m["error"] != "validation" || m["path"] != "f_n2k."+c.key {
			t.Errorf("f_n2k.%s = %.20s: %d %s", c.key, c.value, r.status, r.body)
		}
	}
	good := `{"f_n2k":{"rate_ms":250,"manufacturer":1851,"device_instance":3,"industry_group":4,` +
		`"path_overrides":"[{\"from\":\"electrical.batteries.1\",\"to\":\"electrical.batteries.house\"}]"}}`
	if r := d.call("PUT", "/api/v1/config", good); r.status != 200 {
		t.Fatalf("good values: %d %s", r.status, r.body)
	}
	if r := d.call("PUT", "/api/v1/config", `{"f_n2k":{"rate_ms":0,"manufacturer":2046,"device_instance":0,"path_overrides":"[]"}}`); r.status != 200 {
		t.Fatalf("defaults back: %d %s", r.status, r.body)
	}

	// The owner removes it: it stays removed after a reboot.
	if r := d.call("DELETE", "/api/v1/plugins/n2k", ""); r.status/100 != 2 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	d.reboot()
	if p := offered(); p != nil {
		t.Fatalf("the removed bundled plugin came back after a reboot: %v", p)
	}

	// A factory reset returns the device to what it carries.
	if r := d.call("POST", "/api/v1/system/factory-reset", ""); r.status != 202 {
		t.Fatalf("factory reset: %d %s", r.status, r.body)
	}
	d.waitBoot()
	waitIdle("after the factory reset")
}
