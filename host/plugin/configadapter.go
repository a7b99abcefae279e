package plugin

import (
	"encoding/json"
	"fmt"

	"devhost/host/config"
	runtimens "devhost/runtime-ns"
)

// DeviceConfig implements ConfigRegistry over the device's run-time namespace registry and
// configuration.
type DeviceConfig struct {
	Registry *runtimens.Registry
	Config   *config.Config
}

var _ ConfigRegistry = DeviceConfig{}

// Register registers `f_<id>` from a JSON descriptor.
func (d DeviceConfig) Register(id string, descriptor []byte) (string, error) {
	return d.Registry.RegisterJSON(id, descriptor)
}

// Unregister removes `f_<id>`; its stored values stay.
func (d DeviceConfig) Unregister(id string) error { return d.Registry.Unregister(id) }

// Purge erases the stored values of `f_<id>`.
func (d DeviceConfig) Purge(id string) error { return d.Registry.Purge(id) }

// Values is the namespace's effective values with secrets in clear: the document gives the
// keys and their public form, and each secret is read back through the device-internal Get.
func (d DeviceConfig) Values(ns string) (json.RawMessage, error) {
	doc, err := d.Config.Document(ns)
	if err != nil {
		return nil, fmt.Errorf("plugin config %s: %w", ns, err)
	}
	var top map[string]map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, fmt.Errorf("plugin config %s: %w", ns, err)
	}
	vals := top[ns]
	for k, raw := range vals {
		var s string
		if json.Unmarshal(raw, &s) != nil || s != config.Sentinel {
			continue
		}
		v, err := d.Config.Get(ns, k)
		if err != nil {
			return nil, fmt.Errorf("plugin config %s.%s: %w", ns, k, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("plugin config %s.%s: %w", ns, k, err)
		}
		vals[k] = b
	}
	out, err := json.Marshal(vals)
	if err != nil {
		return nil, fmt.Errorf("plugin config %s: %w", ns, err)
	}
	return out, nil
}
