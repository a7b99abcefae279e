package main

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/plugin"
	"devhost/plugins"
)

// liveRate is a full 250 kbit/s NMEA 2000 bus: about 1,850 frames a second.
const liveRate = 1850

// BenchmarkN2KLiveBus measures the CPU the device's plugin host spends on a full bus: the
// n2k plugin (enabled, delta events off, as the device runs it) in the plugin host, fed the
// Dirona log's frames one at a time at 1,850 frames/s of real time, as the board's CAN bus
// delivers them, for 10 s a round. It reports the process CPU (user and system) over the
// wall time as a percentage of one core; the goal is under 5 %.
//
//	go test -run '^$' -bench N2KLiveBus -benchtime 1x ./cmd/devctl/
func BenchmarkN2KLiveBus(b *testing.B) {
	frames, wasm := n2kBenchInput(b)
	dir := b.TempDir()
	_, man, err := plugins.Manifest("n2k")
	if err != nil {
		b.Fatal(err)
	}
	key, err := abi.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	bundle, err := abi.Pack(man, wasm, key)
	if err != nil {
		b.Fatal(err)
	}
	bus := &logBus{}
	router := &captureRouter{}
	var cache string
	if c, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(c, "devhost", "plugin-code")
	}
	m, err := plugin.New(plugin.Options{
		Dir: filepath.Join(dir, "host"), CacheDir: cache, TrustedKeys: []*rsa.PublicKey{&key.PublicKey},
		Logger: slog.New(slog.DiscardHandler), Publish: func(string, any) {}, DeviceID: "bench",
		Config:    &fixedConfig{values: json.RawMessage(`{"enabled":true,"source":"can","pgn_allow":"","pgn_deny":"","deltas":false}`)},
		Router:    router,
		WallClock: func() (time.Time, string, bool) { return time.Now(), "manual", true },
		CAN:       bus,
		SignalK:   discardSK{},
		// A busy machine stalls a call now and then past the device's 1 s: that ended the
		// plugin (and the bench) without saying anything about its CPU.
		CallTimeout: 30 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.Install(bundle, nil); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for !bus.receiving() {
		if s, ok := m.Status("n2k"); ok && (s.State == plugin.StateFailed || s.State == plugin.StateDisabled) {
			reason := ""
			if s.LastError != nil {
				reason = *s.LastError
			}
			b.Fatalf("plugin %s: %s", s.State, reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
	const round = 10 * time.Second
	var cpu, wall time.Duration
	sent := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cpu0, start := processCPU(), time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		inRound := 0
		for now := range tick.C {
			elapsed := now.Sub(start)
			if elapsed >= round {
				break
			}
			// The frames due by now: a tick the loaded machine delivers late catches up.
			for due := int(elapsed.Seconds() * liveRate); inRound < due; inRound++ {
				f := frames[sent%len(frames)]
				bus.deliver(plugin.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
				sent++
			}
		}
		tick.Stop()
		cpu += processCPU() - cpu0
		wall += time.Since(start)
	}
	b.StopTimer()
	if s, ok := m.Status("n2k"); !ok || s.State != plugin.StateRunning {
		reason := ""
		if s.LastError != nil {
			reason = *s.LastError
		}
		b.Fatalf("plugin %s after the rounds (%d failures): %s", s.State, s.Failures, reason)
	}
	b.ReportMetric(float64(sent)/wall.Seconds(), "frames/s")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%-of-one-core")
}
