package main

import (
	"io"
	"math"
	"strconv"
	"testing"
	"time"

	"devhost/host/skstream"
)

func TestAppendDeltaFrame(t *testing.T) {
	paths := skPathTable("plain")
	for _, n := range []int{1, 3, skPaths + 5} {
		frame := appendDeltaFrame([]byte("stale"), paths, 7, n, time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))[len("stale"):]
		f, err := skstream.ParseFrame(frame)
		if err != nil {
			t.Fatalf("n=%d: %v\n%s", n, err, frame)
		}
		if f.Kind != skstream.FrameDelta || f.Context != "vessels.self" || len(f.Updates) != 1 {
			t.Fatalf("n=%d: parsed %+v", n, f)
		}
		if ts := f.Updates[0].Timestamp; ts != "2026-11-21T12:00:00.000Z" {
			t.Fatalf("n=%d: timestamp %q", n, ts)
		}
		vals := f.Updates[0].Values
		if len(vals) != n {
			t.Fatalf("n=%d: %d values", n, len(vals))
		}
		for i, v := range vals {
			seq := uint64(7 + i)
			if want := paths[seq%skPaths]; v.Path != want {
				t.Errorf("n=%d value %d: path %q, want %q", n, i, v.Path, want)
			}
			if want := strconv.FormatUint(skValueBase+seq, 10); string(v.Value) != want {
				t.Errorf("n=%d value %d: value %s, want %s", n, i, v.Value, want)
			}
		}
	}
}

func TestSkPathTableIsDistinctAndOfOneWidth(t *testing.T) {
	paths := skPathTable("dev0")
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] || len(p) != len(paths[0]) {
			t.Fatalf("path %q repeats or differs in width from %q", p, paths[0])
		}
		seen[p] = true
	}
	if len(seen) != skPaths {
		t.Fatalf("%d paths, want %d", len(seen), skPaths)
	}
}

func TestSignalKArithmetic(t *testing.T) {
	if got := perSecond(5000, 2*time.Second); got != 2500 {
		t.Errorf("perSecond = %v, want 2500", got)
	}
	if got := perSecond(5000, 0); got != 0 {
		t.Errorf("perSecond over no time = %v, want 0", got)
	}
	// 300 ms of CPU for 150 000 values is 2 ms per 1000 values.
	if got := cpuPer1k(300*time.Millisecond, 150_000); math.Abs(got-2) > 1e-9 {
		t.Errorf("cpuPer1k = %v, want 2", got)
	}
	if got := cpuPer1k(time.Second, 0); got != 0 {
		t.Errorf("cpuPer1k of no values = %v, want 0", got)
	}
	tests := []struct {
		published, sent, dropped, want uint64
	}{
		{1000, 10, 0, 1000},
		{1000, 3, 1, 750},
		{1000, 0, 0, 1000},
		{1000, 0, 4, 0},
	}
	for _, tc := range tests {
		if got := deliveredValues(tc.published, tc.sent, tc.dropped); got != tc.want {
			t.Errorf("deliveredValues(%d, %d, %d) = %d, want %d", tc.published, tc.sent, tc.dropped, got, tc.want)
		}
	}
	for _, tc := range []struct {
		values, messages uint64
		want             int
	}{{0, 0, 1}, {10, 0, 1}, {0, 5, 1}, {1000, 3, 333}, {1000, 6, 167}} {
		if got := valuesPerFrame(tc.values, tc.messages); got != tc.want {
			t.Errorf("valuesPerFrame(%d, %d) = %d, want %d", tc.values, tc.messages, got, tc.want)
		}
	}
}

func TestPercentOf(t *testing.T) {
	for _, tc := range []struct {
		part, whole int
		want        float64
	}{{0, 0, 0}, {3, 0, 0}, {0, 10, 0}, {1, 4, 25}, {4, 4, 100}} {
		if got := percentOf(tc.part, tc.whole); got != tc.want {
			t.Errorf("percentOf(%d, %d) = %v, want %v", tc.part, tc.whole, got, tc.want)
		}
	}
}

func TestSkShare(t *testing.T) {
	round := func(dev, plain uint64) skRound {
		return skRound{dev: skResult{delivered: dev, elapsed: time.Second}, plain: skResult{delivered: plain, elapsed: time.Second}}
	}
	for _, tc := range []struct {
		name   string
		rounds []skRound
		want   float64
	}{
		{"none", nil, 0},
		{"plain delivered nothing", []skRound{round(5, 0)}, 0},
		{"one round", []skRound{round(90, 100)}, 0.9},
		// Medians of the rates would give 100/120; the rounds' own ratios are 1, 1.25 and 0.5.
		{"median of the ratios", []skRound{round(100, 100), round(150, 120), round(60, 120)}, 1},
		{"empty round skipped", []skRound{round(80, 100), round(1, 0), round(120, 100)}, 1},
	} {
		if got := skShare(tc.rounds); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: skShare = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSignalKFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || !o.signalk || o.skBatchMs != 100 || o.skPublishers < 1 || o.skDuration <= 0 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-signalk=false"}, io.Discard)
	if err != nil || o.signalk {
		t.Fatalf("-signalk=false: %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-http=false"}, io.Discard)
	if err != nil || o.http || !o.signalk || o.skRounds < 1 || o.skWarmup <= 0 {
		t.Fatalf("-http=false: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"-sk-duration", "0s"}, {"-sk-batch-ms", "-1"}, {"-sk-publishers", "0"}, {"-sk-rounds", "0"}, {"-sk-warmup", "-1s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%v) accepted", args)
		}
	}
}
