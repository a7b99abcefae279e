package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"-duration", "1s", "-rounds", "1", "-puts", "10", "-loadgen", "go"}, true},
		{[]string{"-serve-anchor", "f.json"}, true},
		{[]string{"-duration", "0s"}, false},
		{[]string{"-rounds", "0"}, false},
		{[]string{"-threads", "4", "-connections", "2"}, false},
		{[]string{"-puts", "0"}, false},
		{[]string{"-key", ""}, false},
		{[]string{"-loadgen", "ab"}, false},
		{[]string{"-warmup", "-1s"}, false},
		{[]string{"extra"}, false},
		{[]string{"-json", "out.json", "-gobench", "a.txt", "-gobench", "b.txt"}, true},
		{[]string{"-merge", "-json", "out.json", "-gobench", "a.txt"}, true},
		{[]string{"-merge", "-gobench", "a.txt"}, false},
		{[]string{"-boots", "0"}, true},
		{[]string{"-boots", "-1"}, false},
	}
	for _, tc := range tests {
		_, err := parseFlags(tc.args, io.Discard)
		if (err == nil) != tc.ok {
			t.Errorf("parseFlags(%v): err=%v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

func TestRunReportsAMissingDevice(t *testing.T) {
	var stderr strings.Builder
	code := run([]string{"-devhost", "/nonexistent/devhost", "-loadgen", "go"}, io.Discard, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "make build") {
		t.Errorf("exit %d, stderr %q; want 1 and a hint to build", code, stderr.String())
	}
}

func TestPrintGetsMarksThePingTarget(t *testing.T) {
	runs := func(rps float64) []loadResult {
		return []loadResult{{RPS: rps, P50: time.Millisecond, P99: 2 * time.Millisecond}}
	}
	tests := []struct {
		device float64
		want   string
	}{
		{70, "met (0.70)"},
		{69, "NOT met (0.69)"},
		{140, "met (1.40)"},
	}
	for _, tc := range tests {
		var out strings.Builder
		b := &bench{out: &out}
		b.printGets(&goLoader{}, []getResult{
			{target: getTargets[0], anchor: runs(100), device: runs(tc.device)},
			{target: getTargets[1], anchor: runs(100), device: runs(10)},
		})
		line := ""
		for l := range strings.SplitSeq(out.String(), "\n") {
			if strings.HasPrefix(l, "ping target") {
				line = l
			}
		}
		if !strings.HasSuffix(line, ": "+tc.want) {
			t.Errorf("device %v req/s against 100: %q, want it to end %q", tc.device, line, tc.want)
		}
		if !strings.Contains(out.String(), "0.10") {
			t.Errorf("config ratio missing:\n%s", out.String())
		}
	}
}
