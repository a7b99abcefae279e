package device

import (
	"runtime/debug"

	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/plugin/bundled"
)

// installBundled offers the plugins this firmware carries to the plugin host before it starts
// its plugins (package bundled has the rules); a refusal is logged and the device boots on.
func (d *Device) installBundled(pm *plugin.Manager) {
	if d.syncBundled(pm) {
		// Each carried bundle was copied onto the heap (megabytes) to be verified and
		// installed, and is garbage now; a plugin that starts gives the heap back after its
		// compilation, but with none to start (refused, stopped or removed) the pages would
		// stay resident until the heap grew to its goal again.
		debug.FreeOSMemory()
	}
}

// syncBundled is installBundled's work; it tells whether the firmware carries bundles.
func (d *Device) syncBundled(pm *plugin.Manager) bool {
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
	return len(bs) > 0
}
