package device

import (
	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/plugin/bundled"
)

// installBundled offers the plugins this firmware carries to the plugin host before it starts
// its plugins (package bundled has the rules); a refusal is logged and the device boots on.
func (d *Device) installBundled(pm *plugin.Manager) {
	log := d.ring.Logger("plugins")
	bs, bad := bundled.Carried()
	for _, err := range bad {
		log.Warn("bundled plugin ignored", "err", err)
	}
	for _, r := range bundled.Sync(bs, bundled.ManagerHost(pm), d.store, ota.CompareVersions) {
		switch r.Action {
		case bundled.ActFailed:
			log.Warn("bundled plugin not installed", "id", r.ID, "version", r.Version, "err", r.Err)
		case bundled.ActInstalled, bundled.ActReplaced:
			log.Info("bundled plugin "+string(r.Action), "id", r.ID, "version", r.Version)
		}
	}
}
