package device

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/plugin/bundled"
	runtimens "devhost/runtime-ns"
)

// offerBundled offers the plugins this firmware carries to the plugin host (package bundled
// has the rules) in a goroutine of g that ends with ctx, so that the device answers before
// the offer is done: on a boot with nothing to install it costs a look-up per carried
// bundle, but installing one reads, verifies and stores megabytes. Until it ends, GET
// /plugins says bundled_pending; a plugin it installs is listed from that moment on. A
// refusal is logged and the device runs on. Meanwhile PUT /config tells whoever names a
// carried plugin's namespace to try again shortly (awaitedNamespace).
func (d *Device) offerBundled(ctx context.Context, g *errgroup.Group, pm *plugin.Manager) {
	done := pm.OfferingBundled()
	bs, bad := bundled.Carried() // the heads only: a few kilobytes each
	var offering atomic.Bool
	offering.Store(true)
	d.cfg.AwaitNamespaces(awaitedNamespace(pm, bs, &offering))
	g.Go(func() error {
		defer done()
		defer offering.Store(false)
		if d.syncBundled(ctx, pm, bs, bad) {
			// The bundles read to be installed were copied onto the heap (megabytes) and
			// are garbage now; a plugin that starts gives the heap back after its
			// compilation, but with none to start (refused, stopped or removed) the pages
			// would stay resident until the heap grew to its goal again.
			debug.FreeOSMemory()
		}
		return nil
	})
}

// syncBundled is offerBundled's work on the carried bundles bs (bad: those that could not be
// read); it tells whether a carried bundle was read.
func (d *Device) syncBundled(ctx context.Context, pm *plugin.Manager, bs []bundled.Bundle, bad []error) (read bool) {
	log := d.ring.Logger("plugins")
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

// pluginStatus reads one installed plugin's state (*plugin.Manager).
type pluginStatus interface {
	Status(id string) (plugin.Status, bool)
}

// awaitedNamespace says which unregistered f_<id> namespaces are on their way, for PUT
// /config (config.AwaitNamespaces): that of a plugin still loading (its start registers it),
// and that of a carried plugin not installed yet while offering is true. A plugin installed
// but stopped, refused or without a namespace is not awaited: the plain answer is the truth.
func awaitedNamespace(pm pluginStatus, bs []bundled.Bundle, offering *atomic.Bool) func(ns string) (string, bool) {
	carried := map[string]bool{}
	for _, b := range bs {
		carried[b.ID] = true
	}
	return func(ns string) (string, bool) {
		id, ok := strings.CutPrefix(ns, runtimens.Prefix)
		if !ok {
			return "", false
		}
		st, installed := pm.Status(id)
		switch {
		case installed && st.State == plugin.StateLoading:
			return fmt.Sprintf("namespace %s belongs to the plugin %s, still starting; try again in a few seconds", ns, id), true
		case !installed && carried[id] && offering.Load():
			return fmt.Sprintf("namespace %s belongs to the bundled plugin %s, still being installed; try again in a few seconds", ns, id), true
		}
		return "", false
	}
}
