package main_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"devhost/host/plugin/trust"
	"devhost/host/signalk/sktest"
	"devhost/plugins"
)

// devPlugin is a plugin of plugins/ built for the device, packed and signed with a
// development key of the test's own, which a device started with p.trusted() trusts.
type devPlugin struct {
	keys, bundle string
}

// packPlugin builds the plugin in plugins/dir for the device and packs it with devctl.
func packPlugin(ctx context.Context, t *testing.T, dir string) devPlugin {
	t.Helper()
	p := devPlugin{keys: t.TempDir()}
	if _, _, err := trust.LoadOrCreateDevKey(p.keys); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	wasm := filepath.Join(work, filepath.Base(dir)+".wasm")
	p.bundle = filepath.Join(work, filepath.Base(dir)+".devplug")
	if err := plugins.Build(ctx, dir, wasm); err != nil {
		t.Fatal(err)
	}
	p.ctl(ctx, t, "plugin", "pack", "--manifest", filepath.Join(plugins.Dir(), dir, "manifest.json"), "--wasm", wasm, "--out", p.bundle)
	return p
}

// trusted gives a device the key that signed the bundle.
func (p devPlugin) trusted() devOpt { return withEnv("DEVHOST_KEYS=" + p.keys) }

// install installs the bundle on d with every capability granted; it answers devctl's output.
func (p devPlugin) install(ctx context.Context, t *testing.T, d *dev) string {
	t.Helper()
	return p.ctl(ctx, t, "plugin", "install", "--url", d.base, "--grant-all", p.bundle)
}

// ctl runs devctl with the plugin's key.
func (p devPlugin) ctl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := runTool(ctx, []string{"DEVHOST_KEYS=" + p.keys}, devctl, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The switch-bank plugin end to end: signed and installed with devctl, configured through
// PUT /config, publishing to the real signalk-server, switched by a PUT from the server side,
// driving the simulated board's GPIO, refusing with a failure on a pin fault.
func TestAppPluginEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Wasm plugin (about 15 s)")
	}
	ctx := guardCtx(t, 2)
	p := packPlugin(ctx, t, "app")
	s := sktest.Require(t, sktest.Options{})
	d := newDev(t, p.trusted())
	connectSK(ctx, t, d, s)

	out := p.install(ctx, t, d)
	if !strings.Contains(out, "app") {
		t.Fatalf("install said %q", out)
	}
	eventually(t, "plugin running", func() bool {
		r := d.call("GET", "/api/v1/plugins/app", "")
		return r.status == 200 && r.json(t)["state"] == "running"
	})
	table := `[{\"name\":\"anchor\",\"pin\":4,\"default\":false},{\"name\":\"bilge\",\"pin\":5,\"default\":true}]`
	d.putConfig(`{"f_app":{"switches":"` + table + `"}}`)
	isBool := func(want string) func(json.RawMessage) bool {
		return func(v json.RawMessage) bool { return string(v) == want }
	}
	if _, err := s.WaitValue(ctx, "electrical.switches.bilge.state", isBool("true")); err != nil {
		t.Fatalf("bilge state on the server: %v", err)
	}
	if _, err := s.WaitValue(ctx, "electrical.switches.anchor.state", isBool("false")); err != nil {
		t.Fatalf("anchor state on the server: %v", err)
	}

	// A PUT from the server's side reaches the plugin through the device and drives the pin.
	put := func(value string) (int, []byte) {
		st, body, err := s.Do(ctx, "PUT", "/signalk/v1/api/vessels/self/electrical/switches/anchor/state", s.AdminToken, json.RawMessage(`{"value":`+value+`}`))
		if err != nil {
			t.Fatal(err)
		}
		return st, body
	}
	if st, body := put("true"); st != 202 && st != 200 {
		t.Fatalf("PUT on the server: %d %s", st, body)
	}
	if _, err := s.WaitValue(ctx, "electrical.switches.anchor.state", isBool("true")); err != nil {
		t.Fatalf("anchor after the PUT: %v", err)
	}
	pinHigh := func(pin int) bool {
		d.t.Helper()
		var st struct {
			GPIO []struct {
				Pin  int  `json:"pin"`
				High bool `json:"high"`
			} `json:"gpio"`
		}
		b := d.boardGet("/state")
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		for _, p := range st.GPIO {
			if p.Pin == pin {
				return p.High
			}
		}
		return false
	}
	eventually(t, "pin 4 high", func() bool { return pinHigh(4) })
	sw := d.call("GET", "/api/v1/app/switches", "")
	if sw.status != 200 || !strings.Contains(string(sw.body), "anchor") {
		t.Fatalf("GET /app/switches: %d %s", sw.status, sw.body)
	}

	// A pin fault: the switch answers failure and the plugin raises its condition.
	d.boardCtl("PUT", "/gpio", `{"pin":4,"fault":true}`)
	put("false")
	eventually(t, "app.pinFault raised", func() bool {
		c := d.condition("app.pinFault")
		return c != nil && c["state"] != "normal"
	})
	if !pinHigh(4) {
		t.Fatal("a faulted pin changed level")
	}
}
