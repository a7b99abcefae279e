package device

import (
	"strings"
	"sync/atomic"
	"testing"

	"devhost/host/plugin"
	"devhost/host/plugin/bundled"
)

// fakePlugins is the plugin host's state by id.
type fakePlugins map[string]plugin.State

func (f fakePlugins) Status(id string) (plugin.Status, bool) {
	s, ok := f[id]
	return plugin.Status{ID: id, State: s}, ok
}

// TestAwaitedNamespace is the table of namespaces PUT /config is told to wait for.
func TestAwaitedNamespace(t *testing.T) {
	carried := []bundled.Bundle{{ID: "n2k"}, {ID: "ble"}}
	installed := fakePlugins{"ble": plugin.StateLoading, "app": plugin.StateLoading, "old": plugin.StateStopped, "run": plugin.StateRunning}
	cases := []struct {
		ns       string
		offering bool
		says     string // "" when not awaited
	}{
		{"f_n2k", true, "namespace f_n2k belongs to the bundled plugin n2k, still being installed; try again in a few seconds"},
		{"f_n2k", false, ""},
		{"f_ble", true, "namespace f_ble belongs to the plugin ble, still starting; try again in a few seconds"},
		{"f_app", false, "namespace f_app belongs to the plugin app, still starting"},
		{"f_old", true, ""},
		{"f_run", true, ""},
		{"f_zzz", true, ""},
		{"n2k", true, ""},
		{"httpd", true, ""},
	}
	for _, tc := range cases {
		var offering atomic.Bool
		offering.Store(tc.offering)
		msg, ok := awaitedNamespace(installed, carried, &offering)(tc.ns)
		if ok != (tc.says != "") || !strings.HasPrefix(msg, tc.says) {
			t.Errorf("%s (offering %v) = %q, %v; want %q", tc.ns, tc.offering, msg, ok, tc.says)
		}
	}
}
