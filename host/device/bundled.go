package device

import (
	"context"
	"runtime/debug"

	"golang.org/x/sync/errgroup"

	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/plugin/bundled"
)

// offerBundled offers the plugins this firmware carries to the plugin host (package bundled
// has the rules) in a goroutine of g that ends with ctx, so that the device answers before
// the offer is done: on a boot with nothing to install it costs a look-up per carried
// bundle, but installing one reads, verifies and stores megabytes. Until it ends, GET
// /plugins says bundled_pending; a plugin it installs is listed from that moment on. A
// refusal is logged and the device runs on.
func (d *Device) offerBundled(ctx context.Context, g *errgroup.Group, pm *plugin.Manager) {
	done := pm.OfferingBundled()
	g.Go(func() error {
		defer done()
		if d.syncBundled(ctx, pm) {
			// The bundles read to be installed were copied onto the heap (megabytes) and
			// are garbage now; a plugin that starts gives the heap back after its
			// compilation, but with none to start (refused, stopped or removed) the pages
			// would stay resident until the heap grew to its goal again.
			debug.FreeOSMemory()
		}
		return nil
	})
}

// syncBundled is offerBundled's work; it tells whether a carried bundle was read.
func (d *Device) syncBundled(ctx context.Context, pm *plugin.Manager) (read bool) {
	log := d.ring.Logger("plugins")
	bs, bad := bundled.Carried()
	for _, err := range bad {
		log.Warn("bundled plugin ignored", "err", err)
	}
	for _, r := range bundled.Sync(ctx, bs, bundled.ManagerHost(pm), d.store, ota.CompareVersions) {
		switch r.Action {
		case bundled.ActFailed:
			log.Warn("bundled plugin not installed", "id", r.ID, "version", r.Version, "err", r.Err)
		case bundled.ActInstalled, bundled.ActReplaced:
			log.Info("bundled plugin "+string(r.Action), "id", r.ID, "version", r.Version)
		}
	}
	for i := range bs {
		read = read || bs[i].Loaded()
	}
	return read
}
