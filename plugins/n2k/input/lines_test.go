package input

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func collect(l *Lines, chunks ...string) []string {
	var out []string
	for _, c := range chunks {
		l.Write([]byte(c), func(b []byte) { out = append(out, string(b)) })
	}
	return out
}

func TestLines(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	for _, c := range []struct {
		name     string
		chunks   []string
		want     []string
		overlong uint64
	}{
		{"whole lines", []string{"a\r\nb\n"}, []string{"a", "", "b"}, 0},
		{"a line across chunks", []string{"00:01:02.003 R 09F8", "027F 00 FC\r", "\nnext"}, []string{"00:01:02.003 R 09F8027F 00 FC", ""}, 0},
		{"many small chunks", []string{"a", "b", "c", "\n"}, []string{"abc"}, 0},
		{"overlong in one chunk", []string{long + "\nok\n"}, []string{"ok"}, 1},
		{"overlong across chunks", []string{long[:3000], long[3000:], "\nok\n"}, []string{"ok"}, 1},
		{"a line just at the limit", []string{long[:MaxLine-1], "y\n"}, []string{long[:MaxLine-1] + "y"}, 0},
	} {
		var l Lines
		got := collect(&l, c.chunks...)
		if !reflect.DeepEqual(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if l.Overlong != c.overlong {
			t.Errorf("%s: overlong %d, want %d", c.name, l.Overlong, c.overlong)
		}
	}
	var l Lines
	collect(&l, "partial")
	var flushed []string
	l.Flush(func(b []byte) { flushed = append(flushed, string(b)) })
	if !reflect.DeepEqual(flushed, []string{"partial"}) {
		t.Errorf("flush %q", flushed)
	}
	collect(&l, "left over")
	l.Reset()
	if got := collect(&l, "fresh\n"); !reflect.DeepEqual(got, []string{"fresh"}) {
		t.Errorf("after reset %q", got)
	}
}

// FuzzLines: however a stream is cut, the lines are the same as from the whole stream, and
// none is longer than MaxLine.
func FuzzLines(f *testing.F) {
	f.Add([]byte("00:29:58.617 R 0DFF180D A2 8C\r\nA000057.055 09FF7 0FF00 3F9F\n"), uint8(7))
	f.Add(bytes.Repeat([]byte("z"), MaxLine+10), uint8(100))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint8) {
		var whole, pieces Lines
		var a, b []string
		whole.Write(stream, func(l []byte) { a = append(a, string(l)) })
		step := int(cut) + 1
		for i := 0; i < len(stream); i += step {
			pieces.Write(stream[i:min(i+step, len(stream))], func(l []byte) { b = append(b, string(l)) })
		}
		if !reflect.DeepEqual(a, b) || whole.Overlong != pieces.Overlong {
			t.Fatalf("cut every %d: %q / %q, overlong %d / %d", step, a, b, whole.Overlong, pieces.Overlong)
		}
		for _, l := range a {
			if len(l) > MaxLine {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
	})
}
