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
func BenchmarkN2KDecode(b *testing.B) {
	logPath := filepath.Join(n2kLogs(), "dirona-actisense-serial.head.raw")
	frames, wasm := n2kBenchInput(b)
	dir := b.TempDir()
	var sandboxCPU time.Duration
	for i := 0; i < b.N; i++ {
		st, err := runN2K(context.Background(), wasm, frames, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		sandboxCPU += st.feedCPU
	}
	sandbox := float64(len(frames)*b.N) / sandboxCPU.Seconds()
	b.ReportMetric(sandbox, "sandbox-frames/cpu-s")

	modules := filepath.Join(filepath.Dir(plugins.Dir()), ".cache", "n2k", "ref", "node_modules")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(modules); err != nil || statErr != nil {
		b.Logf("reference not installed (make n2k-reference): sandbox only")
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
	var refCPU time.Duration
	for i := 0; i < b.N; i++ {
		refCPU += run(logPath) - run(empty)
	}
	ref := float64(len(frames)*b.N) / refCPU.Seconds()
	b.ReportMetric(ref, "reference-frames/cpu-s")
	b.ReportMetric(sandbox/ref, "ratio")
}
