package plugin

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time so far of the calling thread (pin the goroutine with
// runtime.LockOSThread first); ok is false where it cannot be read.
func threadCPU() (d time.Duration, ok bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
