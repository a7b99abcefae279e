package sensors

import (
	"math"
	"math/big"
	"strconv"
)

// toFixed rounds x to d decimals the way the reference decoder does
// (JavaScript's parseFloat(x.toFixed(d))): the decimal nearest to the exact binary value of
// |x|, ties going away from zero, the sign put back, then read back as the nearest float64.
// Go's own formatting breaks ties to even, which differs on values such as 0.125.
func toFixed(x float64, d int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1e21 {
		return x
	}
	if !maybeTie(x, d) {
		// Without an exact tie, strconv's correctly rounded result is JavaScript's.
		v, err := strconv.ParseFloat(strconv.FormatFloat(x, 'f', d, 64), 64)
		if err == nil {
			return v
		}
	}
	return toFixedExact(x, d)
}

// toFixedExact rounds with exact big arithmetic.
func toFixedExact(x float64, d int) float64 {
	scale := new(big.Float).SetPrec(256).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil))
	neg := x < 0
	m := new(big.Float).SetPrec(256).Mul(new(big.Float).SetPrec(256).SetFloat64(math.Abs(x)), scale) // exact
	n, _ := m.Int(nil)                                                                               // floor, m >= 0
	frac := new(big.Float).SetPrec(256).Sub(m, new(big.Float).SetPrec(256).SetInt(n))
	if frac.Cmp(big.NewFloat(0.5)) >= 0 {
		n.Add(n, big.NewInt(1))
	}
	digits := n.String()
	for len(digits) <= d {
		digits = "0" + digits
	}
	s := digits[:len(digits)-d]
	if d > 0 {
		s += "." + digits[len(digits)-d:]
	}
	if neg {
		s = "-" + s
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return x
	}
	return v
}

// maybeTie reports whether |x|·10^d may end in exactly .5, the only case where JavaScript's
// rounding and strconv's differ. x = m·2^e with m odd; |x|·10^d·2 = m·5^d·2^(e+d+1) is an
// integer (needed for a tie) only when e+d+1 >= 0.
func maybeTie(x float64, d int) bool {
	frac, exp := math.Frexp(math.Abs(x)) // |x| = frac·2^exp, frac in [0.5, 1)
	if frac == 0 {
		return false
	}
	m := uint64(math.Ldexp(frac, 53)) // exact: 53-bit mantissa
	e := exp - 53
	for m&1 == 0 {
		m >>= 1
		e++
	}
	return e+d+1 >= 0
}
