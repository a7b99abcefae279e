package plugin

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the CPU time the whole process spends (every thread: the plugin's, the
// garbage collector's) over a benchmark loop. On a shared, loaded machine wall time mostly
// measures the other load; CPU time per operation stays close to the work done.
type cpuClock struct{ start time.Duration }

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU(b *testing.B) cpuClock { return cpuClock{start: processCPU(b)} }

// report adds the CPU time per iteration as metric unit.
func (c cpuClock) report(b *testing.B, unit string) {
	b.ReportMetric(float64(processCPU(b)-c.start)/float64(b.N), unit)
}
