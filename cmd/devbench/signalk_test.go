package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/skstream"
	"devhost/host/skstream/skpeer"
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

func TestSkCPUPer1k(t *testing.T) {
	// round gives a round whose sides spent devMs and plainMs of CPU on 1000 values each.
	round := func(devMs, plainMs float64) skRound {
		side := func(ms float64) skResult {
			return skResult{delivered: 1000, cpu: time.Duration(ms * float64(time.Millisecond))}
		}
		return skRound{dev: side(devMs), plain: side(plainMs)}
	}
	for _, tc := range []struct {
		name                   string
		rounds                 []skRound
		dev, plain, roundRatio float64
	}{
		{"none", nil, 0, 0, 0},
		{"one round", []skRound{round(0.3, 0.1)}, 0.3, 0.1, 3},
		// Summed, the disturbed third round's plain client would give 0.15 and a ratio of 2.
		{"a disturbed round", []skRound{round(0.3, 0.1), round(0.3, 0.15), round(0.3, 0.2)}, 0.3, 0.15, 2},
		{"an empty side left out", []skRound{round(0.2, 0.1), {dev: skResult{delivered: 1000, cpu: time.Millisecond}}, round(0.4, 0.1)},
			0.4, 0.1, 3},
	} {
		dev, plain, rr := skCPUPer1k(tc.rounds)
		if math.Abs(dev-tc.dev) > 1e-9 || math.Abs(plain-tc.plain) > 1e-9 || math.Abs(rr-tc.roundRatio) > 1e-9 {
			t.Errorf("%s: skCPUPer1k = %v, %v, %v; want %v, %v, %v", tc.name, dev, plain, rr, tc.dev, tc.plain, tc.roundRatio)
		}
	}
}

func TestSignalKFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || !o.signalk || o.skBatchMs != 100 || o.skPublishers < 1 || o.sk.duration <= 0 {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-signalk=false"}, io.Discard)
	if err != nil || o.signalk {
		t.Fatalf("-signalk=false: %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"-http=false"}, io.Discard)
	if err != nil || o.http || !o.signalk || o.sk.rounds < 1 || o.sk.warmup <= 0 {
		t.Fatalf("-http=false: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"-sk-duration", "0s"}, {"-sk-batch-ms", "-1"}, {"-sk-publishers", "0"}, {"-sk-rounds", "0"}, {"-sk-warmup", "-1s"}} {
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.HasPrefix(err.Error(), args[0]+" ") {
			t.Errorf("parseFlags(%v) = %v, want an error naming %s", args, err, args[0])
		}
	}
}

// Each side process follows the whole exchange against a scripted server: it announces
// itself, publishes for its duration once told to go, ends with the marker, reports, answers
// the CPU question and exits when its stdin closes.
func TestSKSideExchange(t *testing.T) {
	for _, side := range []string{"dev", "plain"} {
		t.Run(side, func(t *testing.T) {
			peer := skpeer.Start(t, skpeer.Options{})
			o, err := parseFlags([]string{"-sk-side", side, "-sk-server", peer.URL(), "-sk-duration", "200ms", "-sk-per-frame", "50", "-sk-sample"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			ran := make(chan error, 1)
			go func() {
				err := runSKSide(ctx, o, inR, outW, slog.New(slog.DiscardHandler))
				_ = outW.CloseWithError(io.EOF)
				ran <- err
			}()
			out := bufio.NewScanner(outR)
			read := func(prefix string) string {
				t.Helper()
				if !out.Scan() {
					t.Fatalf("side output ended before %q: %v", prefix, <-ran)
				}
				rest, ok := strings.CutPrefix(out.Text(), prefix)
				if !ok {
					t.Fatalf("side printed %q, want %q", out.Text(), prefix)
				}
				return rest
			}
			if got := read(skSidePrefix); got != peer.URL() {
				t.Fatalf("announced %q, want %q", got, peer.URL())
			}
			conn := peer.Accept(t)
			const marker = 1_234_567_890
			want := `"path":"` + skDonePath(side) + `","value":` + strconv.Itoa(marker)
			sawMarker := make(chan struct{})
			go func() {
				for f := range conn.Frames() {
					if strings.Contains(string(f), want) {
						close(sawMarker)
						break
					}
				}
				for range conn.Frames() {
				}
			}()
			if _, err := io.WriteString(inW, "go "+strconv.Itoa(marker)+"\n"); err != nil {
				t.Fatal(err)
			}
			var rep skSideReport
			if err := json.Unmarshal([]byte(read(skSentPrefix)), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Published == 0 || rep.Messages == 0 || rep.Dropped != 0 {
				t.Errorf("report %+v: want values in messages, none dropped", rep)
			}
			if side == "dev" && len(rep.LatenciesNS) == 0 {
				t.Error("the device side timed no Publish call")
			}
			select {
			case <-sawMarker:
			case <-ctx.Done():
				t.Fatal("the marker never reached the server")
			}
			if _, err := io.WriteString(inW, "cpu\n"); err != nil {
				t.Fatal(err)
			}
			if ns, err := strconv.ParseInt(read(skCPUPrefix), 10, 64); err != nil || ns < 0 {
				t.Errorf("cpu %d, %v", ns, err)
			}
			_ = inW.Close()
			if err := <-ran; err != nil {
				t.Fatalf("side: %v", err)
			}
		})
	}
}

func TestSKSideFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sk-side", "both", "-sk-server", "http://127.0.0.1:1"},
		{"-sk-side", "dev"},
		{"-sk-side", "plain", "-sk-server", "http://127.0.0.1:1", "-sk-per-frame", "0"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%v) accepted", args)
		}
	}
}

// expect skips lines without the prefix and reports a child that ends first.
func TestChildExpect(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo "anchor: listening on http://127.0.0.1:1"; echo noise; echo "sk-side: cpu 42"`)
	c, err := startChild(context.Background(), clockwork.NewRealClock(), "script", cmd, anchorPrefix, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stop(time.Second) }()
	ctx := context.Background()
	if got, err := c.expect(ctx, skCPUPrefix, time.Minute); err != nil || got != "42" {
		t.Fatalf("expect = %q, %v", got, err)
	}
	if _, err := c.expect(ctx, skCPUPrefix, time.Minute); err == nil || !strings.Contains(err.Error(), "ended before") {
		t.Fatalf("expect after the end: %v", err)
	}
}
