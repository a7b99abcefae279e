package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"devhost/host/api"
	"devhost/host/config"
	"devhost/host/store"
	"devhost/sdk"
)

// The pattern the UI checks and the plugin's own parser agree on every list.
func TestPGNListPatternAndParser(t *testing.T) {
	re := regexp.MustCompile(pgnListPattern)
	for _, c := range []struct {
		list string
		want []uint32 // nil: malformed
	}{
		{"", []uint32{}},
		{"  ", []uint32{}},
		{"129025", []uint32{129025}},
		{"129025,130306", []uint32{129025, 130306}},
		{" 129025 , 130306 ", []uint32{129025, 130306}},
		{"0", []uint32{0}},
		{"00059904", nil}, // leading zeros
		{"059904", nil},
		{"129025,\t130306", nil},
		{"262143", []uint32{262143}},
		{"199999,259999,261999,262099,262139", []uint32{199999, 259999, 261999, 262099, 262139}},
		{"262144", nil},
		{"300000", nil},
		{"4294967296", nil},
		{"129025,abc", nil},
		{"abc", nil},
		{"129025,", []uint32{129025}},
		{",129025", []uint32{129025}},
		{"129025,,130306", []uint32{129025, 130306}},
		{" , ", []uint32{}},
		{"129025 130306,", nil},
		{"129025, ,abc", nil},
		{"-1", nil},
		{"+1", nil},
		{"0x1F805", nil},
		{"129025;130306", nil},
		{"129 025", nil},
		{"1.5", nil},
	} {
		got, err := parsePGNs(c.list)
		if c.want == nil {
			if err == nil {
				t.Errorf("%q: taken as %v, want an error", c.list, got)
			}
		} else if err != nil || len(got) != len(c.want) {
			t.Errorf("%q: %v %v, want %v", c.list, got, err, c.want)
		} else {
			for _, n := range c.want {
				if !got[n] {
					t.Errorf("%q: %d missing from %v", c.list, n, got)
				}
			}
		}
		if re.MatchString(c.list) != (c.want != nil) {
			t.Errorf("%q: pattern matches %v, parser says malformed %v", c.list, re.MatchString(c.list), c.want == nil)
		}
	}
	if _, err := parsePGNs("129025,abc"); err == nil || !strings.Contains(err.Error(), `entry 2 "abc"`) {
		t.Errorf("error %v, want one naming the entry", err)
	}
}

// n2kConfig is the device's configuration with f_n2k registered from the plugin's own
// descriptor, as the plugin host registers it.
func n2kConfig(t *testing.T, h *sdk.FakeHost) *config.Config {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c, err := config.New(st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := config.DecodeNamespace(h.Descriptor)
	if err != nil {
		t.Fatal(err)
	}
	ns.Name = "f_n2k"
	if err := c.Register(ns); err != nil {
		t.Fatal(err)
	}
	return c
}

// Every key of f_n2k with a value it cannot take: the device refuses it (PUT /config's 400
// validation naming the key) where a descriptor rule says so (type, range, length, enum, a
// table's shape); the rest the device stores, as its rules cannot tell (a pattern is the
// UI's; a table's cells are any scalars), and the plugin then names the key in the warn
// condition n2k.config and uses the key's default (a bad override row: the good rows).
func TestEveryKeyWithABadValue(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	c := n2kConfig(t, h)
	const device, plugin = "device", "plugin"
	cases := []struct {
		key   string
		value any
		by    string
		also  map[string]any // other keys set with it
	}{
		{"enabled", "yes", device, nil},
		{"enabled", 1, device, nil},
		{"source", "nmea0183", device, nil},
		{"gateway_host", strings.Repeat("a", 254), device, nil},
		{"gateway_host", "gw host!", plugin, map[string]any{"source": sourceYDTCP}},
		{"gateway_port", 65536, device, nil},
		{"gateway_port", -1, device, nil},
		{"gateway_port", 0, plugin, map[string]any{"source": sourceActisense, "gateway_host": "gw.local"}},
		{"address", 252, device, nil},
		{"address", 1.5, device, nil},
		{"unique_number", 2097152, device, nil},
		{"manufacturer", 2048, device, nil},
		{"device_function", 256, device, nil},
		{"device_class", 128, device, nil},
		{"device_instance", -1, device, nil},
		{"system_instance", 16, device, nil},
		{"industry_group", 8, device, nil},
		{"rate_ms", 60001, device, nil},
		{"rate_ms", "100", device, nil},
		{"path_overrides", `{"from":"a","to":"b"}`, device, nil},
		{"path_overrides", `[{"from":"a","into":"b"}]`, device, nil},
		{"path_overrides", `[{"from":["a"],"to":"b"}]`, device, nil},
		{"path_overrides", `[{"from":"bad path","to":"b"}]`, plugin, nil},
		{"path_overrides", `[{"from":1,"to":"b"}]`, plugin, nil},
		{"pgn_allow", "129025,abc", plugin, nil},
		{"pgn_allow", "262144", plugin, nil},
		{"pgn_allow", strings.Repeat("1,", 501), device, nil},
		{"pgn_deny", "129025, 13O306", plugin, nil},
		{"pgn_deny", 129025, device, nil},
		{"deltas", "on", device, nil},
	}
	covered := map[string]bool{}
	for _, k := range descriptor.Keys {
		covered[k.Name] = false
	}
	for _, tc := range cases {
		if _, ok := covered[tc.key]; !ok {
			t.Fatalf("%s: not a key of f_n2k", tc.key)
		}
		covered[tc.key] = true
		values := map[string]any{"enabled": true, tc.key: tc.value}
		for k, v := range tc.also {
			values[k] = v
		}
		doc, err := json.Marshal(map[string]any{"f_n2k": values})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Apply(doc)
		var ae *api.Error
		switch {
		case tc.by == device && (!errors.As(err, &ae) || ae.Status != 400 || ae.Path == nil || *ae.Path != "f_n2k."+tc.key):
			t.Errorf("%s=%v: device answered %v, want a 400 naming f_n2k.%s", tc.key, tc.value, err, tc.key)
		case tc.by == plugin && err != nil:
			t.Errorf("%s=%v: device refused it (%v): the case belongs to the device", tc.key, tc.value, err)
		case tc.by == plugin:
			if err := h.SetConfig(values); err != nil {
				t.Fatal(err)
			}
			if hl := h.Health["n2k.config"]; hl.State != sdk.Warn || !strings.Contains(hl.Message, tc.key+" ") && !strings.Contains(hl.Message, tc.key+":") {
				t.Errorf("%s=%v: n2k.config %+v, want a warning naming the key", tc.key, tc.value, hl)
			}
			// Set right again: the condition clears.
			reset := map[string]any{"source": sourceCAN, "gateway_host": "", "gateway_port": 0, tc.key: nil}
			for _, k := range descriptor.Keys {
				if k.Name == tc.key {
					reset[tc.key] = k.Default
				}
			}
			if err := h.SetConfig(reset); err != nil {
				t.Fatal(err)
			}
			if hl := h.Health["n2k.config"]; hl.State != sdk.Normal {
				t.Errorf("%s: n2k.config %+v after the fix", tc.key, hl)
			}
		}
	}
	for k, done := range covered {
		if !done {
			t.Errorf("key %s: no bad value tried", k)
		}
	}
}

// A malformed allow list decodes every PGN (its default), not the PGNs it happens to name.
func TestMalformedPGNListIsItsDefault(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true, "pgn_allow": "130306,abc"}); err != nil {
		t.Fatal(err)
	}
	heading(t, h, 7, 1.0)
	if got := published(h, "navigation.headingMagnetic"); len(got) != 1 {
		t.Errorf("headings %v: a malformed allow list still filtered", got)
	}
	if hl := h.Health["n2k.config"]; !strings.Contains(hl.Message, `pgn_allow: entry 2 "abc" is not a PGN`) {
		t.Errorf("n2k.config %+v", hl)
	}
	if err := h.SetConfig(map[string]any{"pgn_allow": "130306"}); err != nil {
		t.Fatal(err)
	}
	heading(t, h, 7, 1.1)
	if got := published(h, "navigation.headingMagnetic"); len(got) != 1 {
		t.Errorf("headings %v: a well-formed allow list let 127250 through", got)
	}
}
