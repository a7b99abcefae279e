package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"devhost/plugins"
)

// BenchmarkN2KDecode compares decode throughput on the Dirona log, in frames per CPU second
// on one process: the n2k plugin through the Wasm sandbox (the feed only, the host's start
// left out) beside canboatjs 3.20.0 + n2k-signalk 4.6.0 in node (its start, measured on an
// empty log, subtracted). `make bench` runs it; the reference comes from make n2k-reference.
//
// The two sides take turns, one run of each per iteration, and each side's figure is its
// frames over its CPU summed over the iterations: on the shared development machine the CPU
// a run costs moves by half between minutes (both sides alike), and turns put the two sides
// in the same minutes, so the ratio compares them rather than the minutes they ran in.
func BenchmarkN2KDecode(b *testing.B) {
	logPath := filepath.Join(n2kLogs(), "dirona-actisense-serial.head.raw")
	frames, wasm := n2kBenchInput(b)
	dir := b.TempDir()
	sandboxRun := func() time.Duration {
		st, err := runN2K(context.Background(), wasm, frames, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		return st.feedCPU
	}
	modules := filepath.Join(filepath.Dir(plugins.Dir()), ".cache", "n2k", "ref", "node_modules")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(modules); err != nil || statErr != nil {
		b.Logf("reference not installed (make n2k-reference): sandbox only")
		var sandboxCPU time.Duration
		for i := 0; i < b.N; i++ {
			sandboxCPU += sandboxRun()
		}
		b.ReportMetric(float64(len(frames)*b.N)/sandboxCPU.Seconds(), "sandbox-frames/cpu-s")
		return
	}
	run := func(path string) time.Duration {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Close()
		cmd := exec.Command(node, filepath.Join(plugins.Dir(), "n2k", "testdata", "reference.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		cmd.Stdin, cmd.Stdout = in, io.Discard
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Run(); err != nil {
			b.Fatalf("reference: %v: %s", err, errOut.String())
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	empty := filepath.Join(dir, "empty.log")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	var sandboxCPU, refCPU time.Duration
	for i := 0; i < b.N; i++ {
		sandboxCPU += sandboxRun()
		refCPU += run(logPath) - run(empty)
	}
	sandbox := float64(len(frames)*b.N) / sandboxCPU.Seconds()
	ref := float64(len(frames)*b.N) / refCPU.Seconds()
	b.ReportMetric(sandbox, "sandbox-frames/cpu-s")
	b.ReportMetric(ref, "reference-frames/cpu-s")
	b.ReportMetric(sandbox/ref, "ratio")
}
