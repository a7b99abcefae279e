package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// percentile is the nearest-rank p-quantile of sorted (0 for none).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median of vs (0 for none); an even count takes the mean of the middle two.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func medianDuration(ds []time.Duration) time.Duration {
	fs := make([]float64, len(ds))
	for i, d := range ds {
		fs[i] = float64(d)
	}
	return time.Duration(math.Round(median(fs)))
}

func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	return time.Duration(math.Round(sum / float64(len(ds))))
}

// latencyStats are the figures reported for one set of timed operations.
type latencyStats struct {
	P50, P99, Mean time.Duration
}

func summarize(ds []time.Duration) latencyStats {
	s := slices.Clone(ds)
	slices.Sort(s)
	return latencyStats{P50: percentile(s, 0.50), P99: percentile(s, 0.99), Mean: mean(s)}
}

// ratio formats a/b with two decimals ("-" when b is zero).
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) || math.IsInf(a/b, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// fmtDuration prints a latency in the unit that keeps two decimals meaningful.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.2fus", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}
