package skstream

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The integer shortcut of appendNumber must print what the shortest float form prints.
func TestAppendNumberIntegersMatchFloatForm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []float64{0, 1, -1, 9, 10, 99, 100, 1e6, 1e15, -1e15, 1<<53 - 1, -(1<<53 - 1),
		1 << 52, 1000000123, 4294967296, math.MaxInt32, math.MinInt32}
	for range 100000 {
		vals = append(vals, math.Trunc((r.Float64()*2-1)*math.Pow(10, float64(r.IntN(16)))))
	}
	for _, v := range vals {
		want := strconv.AppendFloat(nil, v, 'f', -1, 64)
		if got := appendNumber(nil, v); string(got) != string(want) {
			t.Fatalf("appendNumber(%v) = %s, want %s", v, got, want)
		}
	}
	// Negative zero keeps the float form it always had.
	if got := string(appendNumber(nil, math.Copysign(0, -1))); got != "-0" {
		t.Fatalf("appendNumber(-0) = %s", got)
	}
}

// Paths are copied into a delta without escaping: only path bytes may pass checkPath.
func TestPathBytesNeedNoEscape(t *testing.T) {
	for c := range 256 {
		if !pathByte(byte(c)) {
			continue
		}
		s := string([]byte{byte(c)})
		if got := string(appendJSONString(nil, s)); got != `"`+s+`"` {
			t.Fatalf("path byte %q is escaped as %s", byte(c), got)
		}
	}
}

// checkPath in one pass gives the answer (and the message) of the plain definition: every byte
// a path byte, then no empty segment.
func TestCheckPathOnePassMatchesDefinition(t *testing.T) {
	ref := func(p string) string {
		if len(p) == 0 || len(p) > MaxPathLen {
			return "length"
		}
		for i := 0; i < len(p); i++ {
			if !pathByte(p[i]) {
				return "byte " + strconv.QuoteRune(rune(p[i]))
			}
		}
		if p[0] == '.' || p[len(p)-1] == '.' || strings.Contains(p, "..") {
			return "empty segment"
		}
		return ""
	}
	got := func(p string) string {
		err := checkPath(p)
		switch {
		case err == nil:
			return ""
		case strings.Contains(err.Error(), "path length"):
			return "length"
		case strings.Contains(err.Error(), "empty segment"):
			return "empty segment"
		}
		i := strings.LastIndex(err.Error(), "byte ")
		return err.Error()[i:]
	}
	r := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ab.._-:Z9 *\"\xff"
	for range 200000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		p := string(b)
		if g, w := got(p), ref(p); g != w {
			t.Fatalf("checkPath(%q): %q, want %q", p, g, w)
		}
	}
}
