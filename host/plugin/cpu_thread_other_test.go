//go:build !linux

package plugin

import "time"

// threadCPU is the CPU time of the calling thread: not read outside Linux.
func threadCPU() (time.Duration, bool) { return 0, false }
