package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second (nearest rank)", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p100", ms(1, 2, 3), 1, 3 * time.Millisecond},
		{"p0", ms(1, 2, 3), 0, time.Millisecond},
	}
	for _, tc := range tests {
		if got := percentile(tc.in, tc.p); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tc := range tests {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 {
		t.Error("median reordered its input")
	}
}

func TestSummarize(t *testing.T) {
	got := summarize([]time.Duration{4 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond})
	want := latencyStats{P50: 2 * time.Millisecond, P99: 4 * time.Millisecond, Mean: 2500 * time.Microsecond}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestRatioAndFormat(t *testing.T) {
	for _, tc := range []struct {
		a, b float64
		want string
	}{{7, 10, "0.70"}, {2, 3, "0.67"}, {1, 0, "-"}, {0, 0, "-"}} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{{86110 * time.Nanosecond, "86.11us"}, {1200 * time.Microsecond, "1.20ms"}, {1500 * time.Millisecond, "1.50s"}} {
		if got := fmtDuration(tc.d); got != tc.want {
			t.Errorf("fmtDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestSummarizeRunsTakesMedians(t *testing.T) {
	runs := []loadResult{
		{RPS: 100, P50: 3 * time.Millisecond, P99: 9 * time.Millisecond, SocketErrors: 1},
		{RPS: 300, P50: 1 * time.Millisecond, P99: 5 * time.Millisecond},
		{RPS: 200, P50: 2 * time.Millisecond, P99: 7 * time.Millisecond, SocketErrors: 2},
	}
	got := summarizeRuns(runs)
	want := runSummary{rps: 200, p50: 2 * time.Millisecond, p99: 7 * time.Millisecond, socketErrors: 3}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tdevhost\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t5\n"
	if got, err := parseVmRSS([]byte(status)); err != nil || got != 1234 {
		t.Errorf("got %d, %v; want 1234", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n"} {
		if _, err := parseVmRSS([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
