package sensors

import "testing"

// Expected strings are what JavaScript's Number.prototype.toFixed answers (node 20).
func TestToFixedLikeJavaScript(t *testing.T) {
	tests := []struct {
		x    float64
		d    int
		want float64
	}{
		{0.125, 2, 0.13},   // exact tie: away from zero (Go's strconv gives 0.12)
		{-0.125, 2, -0.13}, // the sign is handled apart, so also away from zero
		{1.005, 2, 1},      // 1.005 is 1.00499999999999989... in binary
		{297.45, 2, 297.45},
		{273.15 + 25.06, 2, 298.21},
		{0.5055, 2, 0.51},
		{2.977, 2, 2.98},
		{1.6 + 1.377, 2, 2.98},
		{-0.004, 2, 0}, // "-0.00" reads back as -0, which equals 0
		{109.315, 3, 109.315},
		{2.5, 0, 3},
		{-2.5, 0, -3},
	}
	for _, tc := range tests {
		if got := toFixed(tc.x, tc.d); got != tc.want {
			t.Errorf("toFixed(%v, %d) = %v, want %v", tc.x, tc.d, got, tc.want)
		}
	}
}

// The fast path must agree with the exact one everywhere: compare both on many values,
// including every multiple of 1/1024 (where ties live) and scaled sensor readings.
func TestToFixedFastPathAgrees(t *testing.T) {
	exact := toFixedExact
	for i := -8000; i <= 8000; i++ {
		for _, x := range []float64{float64(i) / 1024, 273.15 + float64(i)*0.005, float64(i) * 0.0025 / 100, 1.6 + float64(i&2047)/1000} {
			for d := 0; d <= 3; d++ {
				if got, want := toFixed(x, d), exact(x, d); got != want {
					t.Fatalf("toFixed(%v, %d) = %v, exact %v", x, d, got, want)
				}
			}
		}
	}
}
