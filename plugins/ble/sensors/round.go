package sensors

import (
	"math"
	"math/big"
	"strconv"
)

// toFixed rounds x to d decimals the way the reference decoder does
// (JavaScript's parseFloat(x.toFixed(d))): the decimal nearest to the exact binary value,
// ties going to the larger number, then read back as the nearest float64. Go's own
// formatting breaks ties to even, which differs on values such as 0.125.
func toFixed(x float64, d int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1e21 {
		return x
	}
	scale := new(big.Float).SetPrec(256).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil))
	m := new(big.Float).SetPrec(256).Mul(new(big.Float).SetPrec(256).SetFloat64(x), scale) // exact
	n, _ := m.Int(nil)                                                                     // truncates toward zero
	if m.Sign() < 0 && new(big.Float).SetPrec(256).SetInt(n).Cmp(m) != 0 {
		n.Sub(n, big.NewInt(1)) // floor
	}
	frac := new(big.Float).SetPrec(256).Sub(m, new(big.Float).SetPrec(256).SetInt(n))
	if frac.Cmp(big.NewFloat(0.5)) >= 0 {
		n.Add(n, big.NewInt(1))
	}
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
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
