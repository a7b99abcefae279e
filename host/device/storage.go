package device

import (
	"errors"
	"syscall"

	"devhost/host/health"
)

// StorageHealthKey is the health condition raised when the configuration store could not
// compact its file at boot (typically a full data directory). The device boots and serves
// every stored value; writes fail as the disk does (500 write_failed) until space is freed.
// It is a warn, never fatal: restarting cannot make room. A boot that compacts clears it.
const StorageHealthKey = "storageFull"

// reportStorage raises StorageHealthKey when the store deferred its compaction at open. The
// message names the system's reason, never a path inside the device.
func (d *Device) reportStorage() {
	err := d.store.CompactDeferred()
	if err == nil {
		return
	}
	reason := "the write failed"
	var errno syscall.Errno
	if errors.As(err, &errno) {
		reason = errno.Error()
	}
	d.log.Warn("configuration store not compacted at boot", "err", err)
	msg := "configuration store not compacted at boot: " + reason + "; stored values are served, writes may fail until space is freed"
	if rerr := d.hlth.Report(StorageHealthKey, health.Warn, msg); rerr != nil {
		d.log.Warn("storage health condition not reported", "err", rerr)
	}
}
