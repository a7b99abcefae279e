package gateway

import (
	"bufio"
	"errors"
	"os"
	"testing"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
)

// BenchmarkDirona runs the pipeline natively over the Dirona log's frames (whole messages
// split into the frames that carry them), for allocations and time per frame.
func BenchmarkDirona(b *testing.B) {
	f, err := os.Open("../testdata/logs/dirona-actisense-serial.head.raw")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	p, _ := input.NewParser(input.Analyzer)
	var frames []decode.Frame
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r, err := p.Parse(sc.Text())
		if errors.Is(err, input.ErrSkip) || err != nil {
			continue
		}
		if r.Frame != nil {
			frames = append(frames, *r.Frame)
		} else {
			frames = append(frames, decode.Frames(*r.Msg, 0, nil)...)
		}
	}
	b.ResetTimer()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		g := New()
		for _, fr := range frames {
			g.Frame(fr, "2026-01-01T00:00:00.000Z")
		}
	}
	b.ReportMetric(float64(len(frames))*float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
