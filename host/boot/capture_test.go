package boot

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// referenceCrash is what capture.crash should return for the whole stream, computed the
// simple way: from the start of the last line that opens a crash report.
func referenceCrash(all []byte) ([]byte, bool) {
	start := -1
	off := 0
	for _, line := range bytes.SplitAfter(all, []byte("\n")) {
		for _, m := range crashMarkers {
			if bytes.HasPrefix(line, m) {
				start = off
				break
			}
		}
		off += len(line)
	}
	if start < 0 {
		return nil, false
	}
	h := all[start:]
	if len(h) > CaptureSize {
		return h[:CaptureSize], true
	}
	return h, false
}

func referenceTail(all []byte) []byte {
	if len(all) > CaptureSize {
		return all[len(all)-CaptureSize:]
	}
	return all
}

// feed writes b in chunks of random sizes.
func feed(c io.Writer, b []byte, rng *rand.Rand) {
	for len(b) > 0 {
		n := min(len(b), 1+rng.IntN(40))
		if rng.IntN(50) == 0 {
			n = min(len(b), 1+rng.IntN(CaptureSize+10))
		}
		_, _ = c.Write(b[:n])
		b = b[n:]
	}
}

func checkCapture(t *testing.T, all []byte, seed uint64) {
	t.Helper()
	c := newCapture()
	feed(c, all, rand.New(rand.NewPCG(seed, 1)))
	wantHead, wantCut := referenceCrash(all)
	head, cut := c.crash()
	if !bytes.Equal(head, wantHead) || cut != wantCut {
		t.Fatalf("crash capture: got %d bytes (cut %v) %.60q, want %d bytes (cut %v) %.60q",
			len(head), cut, head, len(wantHead), wantCut, wantHead)
	}
	if tail := c.tail(); !bytes.Equal(tail, referenceTail(all)) {
		t.Fatalf("tail: got %d bytes, want %d", len(tail), len(referenceTail(all)))
	}
}

func TestCapture(t *testing.T) {
	logs := strings.Repeat("time=... level=INFO msg=\"a panic: that is not at the start\"\n", 3000)
	report := "panic: boom\n\ngoroutine 7 [running]:\nmain.f()\n\t/x.go:1 +0x1 fp=0x1 sp=0x2 pc=0x3\n"
	bigReport := "fatal error: out of memory\n\n" + strings.Repeat("goroutine 9 [chan receive]:\nmain.g()\n\t/y.go:2 +0x2 fp=0x1 sp=0x2 pc=0x4\n\n", 2000)
	cases := map[string]string{
		"no crash":                logs,
		"crash after logs":        logs + report,
		"crash report over 64KiB": logs + bigReport,
		"two crashes, last wins":  report + logs + "fatal error: concurrent map writes\n\ngoroutine 3 [running]:\n",
		"marker split mid-word":   "pan" + "ic: no\n",
		"false start":             "pani\npanic: yes\n",
		"signal report":           "x\nSIGSEGV: segmentation violation\nPC=0x1\n",
		"crash then more logs":    report + "late line\n",
		"unterminated":            "panic: no newline at the end",
		"short marker line":       "panic\nSIG\n",
		"empty":                   "",
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(5) {
				checkCapture(t, []byte(s), seed)
			}
		})
	}
}

func FuzzCapture(f *testing.F) {
	f.Add([]byte("panic: x\n\ngoroutine 1 [running]:\n"), uint64(1))
	f.Add([]byte("log\nfatal error: y\nSIGQUIT: quit\n"), uint64(2))
	f.Add([]byte("panpanic: \npanic: \n"), uint64(3))
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		checkCapture(t, b, seed)
	})
}

func TestTeeKeepsCapturingWhenForwardFails(t *testing.T) {
	c := newCapture()
	w := teeWriter{out: failingWriter{}, cap: c}
	if n, err := w.Write([]byte("panic: boom\n")); n != 12 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	if h, _ := c.crash(); string(h) != "panic: boom\n" {
		t.Fatalf("captured %q", h)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestBackoff(t *testing.T) {
	b := backoff{cfg: Backoff{Min: time.Second, Max: 30 * time.Second, Healthy: time.Minute}}
	steps := []struct {
		uptime time.Duration
		want   time.Duration
	}{
		{0, time.Second},
		{time.Second, 2 * time.Second},
		{59 * time.Second, 4 * time.Second},
		{0, 8 * time.Second},
		{0, 16 * time.Second},
		{0, 30 * time.Second},
		{0, 30 * time.Second},
		{time.Minute, time.Second}, // a healthy run starts the series again
		{0, 2 * time.Second},
	}
	for i, s := range steps {
		if got := b.next(s.uptime); got != s.want {
			t.Fatalf("crash %d after %v: wait %v, want %v", i+1, s.uptime, got, s.want)
		}
	}
	// A long series never overflows past Max.
	var d time.Duration
	for range 100 {
		if d = b.next(0); d <= 0 || d > 30*time.Second {
			t.Fatalf("wait %v", d)
		}
	}
	if d != 30*time.Second {
		t.Fatalf("wait %v after a long series", d)
	}
}

func TestOptionsDefaults(t *testing.T) {
	if _, err := (Options{}).withDefaults(); err == nil {
		t.Fatal("no data directory accepted")
	}
	o, err := Options{DataDir: t.TempDir(), Backoff: Backoff{Min: time.Minute}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Exe == "" || o.StopTimeout != DefaultStopTimeout || o.Backoff.Max != time.Minute ||
		o.Backoff.Healthy != DefaultBackoffHealthy || o.Clock == nil || o.Logger == nil {
		t.Fatalf("defaults %+v", o)
	}
}
