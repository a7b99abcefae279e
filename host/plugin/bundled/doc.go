// Package bundled installs the plugins the firmware carries, as the device installs the web
// UI it carries: `make build` compiles each bundled plugin, packs and signs it with the
// development plugin key and `go build -tags bundled` embeds the bundles; a build without the
// tag carries none and this package then does nothing.
//
// At every boot, in the background (the device answers without waiting for it, and the
// plugin host may already be starting the plugins installed before), Sync offers each carried bundle to the plugin host, which verifies
// it against the device's trust store exactly as it does an upload. The rules, per plugin id:
//   - not installed and never offered on this device: installed (the first boot, and the
//     first boot after a factory reset, which erases the record of what was offered);
//   - not installed but offered before: the owner removed it; it stays removed until a
//     factory reset;
//   - installed at an older version than the carried one (a firmware update brought a newer
//     bundle): replaced, keeping the capabilities the owner withheld withheld and a stopped
//     plugin stopped;
//   - installed at the same or a newer version (the owner uploaded a newer one): kept.
//
// The record is one key per plugin id in the configuration store ("state/bundled/<id>",
// the version and digest of the bundle last offered), so a factory reset, which erases the
// store, forgets it. The carried bundles are listed from their heads (manifest and
// signature); a bundle's bytes are read only to install it, and a bundle signed by a key
// the device does not trust is refused without reading it. So a boot that finds its
// bundles offered before reads a few kilobytes and writes nothing.
package bundled
