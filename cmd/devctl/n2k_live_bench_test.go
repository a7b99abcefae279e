package main

import (
	"context"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"devhost/host/plugin"
	"devhost/plugins/n2k/decode"
)

// liveRate is a full 250 kbit/s NMEA 2000 bus: about 1,850 frames a second.
const liveRate = 1850

// BenchmarkN2KLiveBus measures the CPU the device's plugin host spends on a full bus: the
// n2k plugin (enabled, delta events off, as the device runs it) in the plugin host, fed the
// Dirona log's frames one at a time at 1,850 frames/s of real time, as the board's CAN bus
// delivers them, for 10 s a round. The goal is under 5 % of one core.
//
// The frames come from a feeder in the same process that wakes every 10 ms: on the 2-core
// development machine a bare 10 ms ticker alone costs about 1 % of a core, the bus's CPU
// rather than the device's. A first round with no device runs the same feeder onto a bus
// nobody listens to; cpu-%-of-one-core is the process CPU (user and system) of the rounds
// with the device less that feeder round's, as a percentage of one core. process-cpu-% is
// the whole process's (feeder included) and feeder-cpu-% the feeder round's alone. What a
// delivered frame costs the device (the plugin host's receive callback, its queue) is in
// the device's share: the feeder's round calls the same delivery with no receiver.
//
//	go test -run '^$' -bench N2KLiveBus -benchtime 1x ./cmd/devctl/
func BenchmarkN2KLiveBus(b *testing.B) {
	frames, wasm := n2kBenchInput(b)
	// The feeder's own CPU, before the device exists: the same rounds onto a bus with no
	// receiver. Each measurement starts with the setup's garbage collected and its memory
	// handed back (the runtime's background scavenger otherwise returns it during the first
	// round at up to 1 % of a core, a cost of the setup and not of either side), then a
	// warm-up (liveWarmUp) in which the heaps grow back to what a running bus needs: the
	// page faults of regrowing them are not the steady cost either.
	debug.FreeOSMemory()
	feedRound(frames, 0, (&logBus{}).deliver, liveWarmUp)
	var feederCPU, feederWall time.Duration
	feederSw0 := contextSwitches()
	for i := 0; i < b.N; i++ {
		c, w, _ := feedRound(frames, 0, (&logBus{}).deliver, liveRound)
		feederCPU += c
		feederWall += w
	}
	feederSw := float64(contextSwitches()-feederSw0) / feederWall.Seconds()
	h, err := startN2K(context.Background(), wasm, false, func(string, any) {})
	if err != nil {
		b.Fatal(err)
	}
	defer h.stop()
	m, bus := h.m, h.bus
	for !bus.receiving() {
		if err := h.failed(); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var cpu, wall time.Duration
	sent := 0
	debug.FreeOSMemory()
	_, _, sent = feedRound(frames, sent, bus.deliver, liveWarmUp)
	sent0 := sent
	calls0 := status(b, m).Calls
	sw0 := contextSwitches()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, w, n := feedRound(frames, sent, bus.deliver, liveRound)
		cpu += c
		wall += w
		sent = n
	}
	b.StopTimer()
	sw := float64(contextSwitches()-sw0) / wall.Seconds()
	st := status(b, m)
	if st.State != plugin.StateRunning {
		reason := ""
		if st.LastError != nil {
			reason = *st.LastError
		}
		b.Fatalf("plugin %s after the rounds (%d failures): %s", st.State, st.Failures, reason)
	}
	feeder := feederCPU.Seconds() / feederWall.Seconds()
	b.ReportMetric(float64(sent-sent0)/wall.Seconds(), "frames/s")
	b.ReportMetric(float64(st.Calls-calls0)/wall.Seconds(), "calls/s")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "process-cpu-%")
	b.ReportMetric(100*feeder, "feeder-cpu-%")
	b.ReportMetric(100*(cpu.Seconds()/wall.Seconds()-feeder), "cpu-%-of-one-core")
	// Context switches of the process's threads (a thread going to sleep or being put off a
	// core) per second, the device's (less the feeder round's): a count of the wake-ups,
	// steadier than the CPU on a loaded machine.
	b.ReportMetric(sw-feederSw, "ctxsw/s")
}

// contextSwitches answers the context switches of this process's threads so far,
// voluntary and not.
func contextSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// liveRound is how long one round of the live bench feeds the bus, liveWarmUp how long it
// is fed before the rounds.
const (
	liveRound  = 10 * time.Second
	liveWarmUp = 3 * time.Second
)

// feedRound plays the log's frames onto deliver at liveRate for d, from frame sent
// on (the log repeats), waking every 10 ms for the frames due by then. It answers the
// process CPU and the wall time the round took, and the count of frames sent after it.
func feedRound(frames []decode.Frame, sent int, deliver func(plugin.CANFrame), d time.Duration) (cpu, wall time.Duration, _ int) {
	cpu0, start := processCPU(), time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	inRound := 0
	for now := range tick.C {
		elapsed := now.Sub(start)
		if elapsed >= d {
			break
		}
		// The frames due by now: a tick the loaded machine delivers late catches up.
		for due := int(elapsed.Seconds() * liveRate); inRound < due; inRound++ {
			f := frames[sent%len(frames)]
			deliver(plugin.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
			sent++
		}
	}
	return processCPU() - cpu0, time.Since(start), sent
}

// status answers the n2k plugin's status, failing the benchmark when there is none.
func status(b *testing.B, m *plugin.Manager) plugin.Status {
	b.Helper()
	s, ok := m.Status("n2k")
	if !ok {
		b.Fatal("no n2k plugin")
	}
	return s
}
