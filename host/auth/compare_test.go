package auth

import (
	"strings"
	"testing"
)

// A maximum beyond the stack buffers compares the same way.
func TestCtEqualBeyondTheStackBuffers(t *testing.T) {
	long := strings.Repeat("s", ctStack+10)
	max := ctStack + 20
	cases := []struct {
		a, b string
		want bool
	}{
		{long, long, true},
		{long, long[:len(long)-1] + "t", false},
		{long, long + "s", false},
		{long + strings.Repeat("s", 11), long + strings.Repeat("s", 11), false}, // beyond max
	}
	for _, tc := range cases {
		if got := ctEqual(tc.a, tc.b, max); got != tc.want {
			t.Errorf("ctEqual(len %d, len %d) = %v, want %v", len(tc.a), len(tc.b), got, tc.want)
		}
	}
}

// The key check runs on every authenticated request; it must not allocate.
func TestCtEqualDoesNotAllocate(t *testing.T) {
	key := strings.Repeat("k", 40)
	if n := testing.AllocsPerRun(100, func() { ctEqual(key, key, MaxKeyLen) }); n != 0 {
		t.Errorf("ctEqual allocates %v times per call", n)
	}
}
