package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
)

// MaxWakeKeys bounds the configuration keys one Wake names.
const MaxWakeKeys = 16

// Wake is the dormant message (ABI 1.4, section 15): what ends a plugin's dormancy. A
// plugin whose work is off sends it; the host closes the instance once it is idle and
// starts a fresh one (dev_init, as after a restart) when one of the conditions holds.
//
//   - Config: keys of the plugin's own namespace and the values it sleeps with; a key whose
//     effective value is anything else wakes it (compared as JSON values: 1 and 1.0 are
//     equal, "1" is not). The namespace must be registered and know every key.
//   - Button: a press of the provisioning button wakes it; the press is delivered to the new
//     instance as a button event. Needs button.
//   - WiFiUnconfigured: the WiFi station having no network configured wakes it. Needs
//     wifi.prov.
//
// A Wake with no condition at all is refused: nothing could ever wake the plugin but an
// operator. A request to the plugin's HTTP routes always wakes it (the request is
// delivered to the new instance); so does a restart by an operator.
type Wake struct {
	Config           map[string]json.RawMessage `json:"config,omitempty"`
	Button           bool                       `json:"button,omitempty"`
	WiFiUnconfigured bool                       `json:"wifi_unconfigured,omitempty"`
}

// ErrNoWake is a Wake without a condition.
var ErrNoWake = errors.New("dormant: no wake condition")

// Empty reports whether w names no condition.
func (w Wake) Empty() bool { return len(w.Config) == 0 && !w.Button && !w.WiFiUnconfigured }

// EncodeWake is the dormant message of w.
func EncodeWake(w Wake) ([]byte, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// DecodeWake reads a dormant message strictly (DecodeStrict) and checks its limits.
func DecodeWake(b []byte) (Wake, error) {
	var w Wake
	if err := DecodeStrict(b, &w); err != nil {
		return Wake{}, fmt.Errorf("dormant: %w", err)
	}
	return w, w.check()
}

func (w Wake) check() error {
	if w.Empty() {
		return ErrNoWake
	}
	if len(w.Config) > MaxWakeKeys {
		return fmt.Errorf("dormant: %d config keys, at most %d", len(w.Config), MaxWakeKeys)
	}
	for k, v := range w.Config {
		var x any
		if k == "" || json.Unmarshal(v, &x) != nil {
			return fmt.Errorf("dormant: config key %q: not a key and a JSON value", k)
		}
	}
	return nil
}

// Keys is the configuration keys w names, sorted.
func (w Wake) Keys() []string {
	out := make([]string, 0, len(w.Config))
	for k := range w.Config {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ConfigWakes reports whether values (a namespace's effective values, by key) differ from
// what w sleeps with in any key w names; a key missing from values counts as a difference.
func (w Wake) ConfigWakes(values map[string]json.RawMessage) bool {
	for k, want := range w.Config {
		got, ok := values[k]
		if !ok || !sameJSON(got, want) {
			return true
		}
	}
	return false
}

// Equal reports whether w and o name the same conditions with the same values.
func (w Wake) Equal(o Wake) bool {
	if w.Button != o.Button || w.WiFiUnconfigured != o.WiFiUnconfigured || len(w.Config) != len(o.Config) {
		return false
	}
	for k, v := range w.Config {
		ov, ok := o.Config[k]
		if !ok || !sameJSON(v, ov) {
			return false
		}
	}
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
