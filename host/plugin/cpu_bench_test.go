package plugin

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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

// niceCPU is the CPU time so far of the process's threads running at workerNice, the plugin
// workers' (Linux: /proc/self/task/*/stat; elsewhere ok is false). On a shared machine the
// throughput of the host beside a spinning plugin mostly measures the other load; the CPU
// the plugin got says how much it took from the host.
func niceCPU() (d time.Duration, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		// The fields after the command's closing parenthesis: state is the 3rd field of
		// stat, utime the 14th, stime the 15th, nice the 19th.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 17 || f[16] != strconv.Itoa(workerNice) {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		d += time.Duration(ut+st) * (time.Second / clockTicks)
	}
	return d, true
}

// clockTicks is the kernel's USER_HZ, the unit of /proc's CPU times (100 on every Linux
// architecture Go supports).
const clockTicks = 100
