//go:build linux

package plugin

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// workerNice is the nice value of a plugin worker's thread. Plugin code is compute the host
// cannot interrupt before the call limit; at nice 10 the kernel gives the host's own threads
// (the HTTP server, Signal K) about nine tenths of a contended core.
const workerNice = 10

// lowerWorkerPriority pins the calling goroutine to its OS thread and lowers that thread's
// scheduling priority (Linux's nice is per thread). The goroutine stays locked for the rest
// of its life: when it exits locked, the runtime ends the thread instead of handing a
// low-priority thread to other goroutines. Failure leaves the normal priority; it costs only
// latency.
func lowerWorkerPriority() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), workerNice)
}
