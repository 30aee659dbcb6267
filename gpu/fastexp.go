package gpu

import "math"

// expNeg is e^x for the attention weights, x ≤ 0 (larger x is clamped to
// 0, below −708 it is 0). It splits x = k·ln2 + r with |r| ≤ ln2/2 and
// evaluates e^r by a degree-8 Taylor polynomial, then scales by 2^k
// through the exponent bits: relative error below 1e-9 (ample for
// weights that are later rounded to float32-level sums) and faster than
// math.Exp, with no table and the same bits on every machine.
func expNeg(x float64) float64 {
	if x >= 0 {
		return 1
	}
	if x < -708 {
		return 0
	}
	const ln2Hi, ln2Lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
	k := math.Floor(x*math.Log2E + 0.5)
	r := (x - k*ln2Hi) - k*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320))))))))
	e := int64(k) + 1023
	if e <= 0 {
		// Subnormal result: scale in two steps.
		return p * math.Float64frombits(uint64(e+1022)<<52) * 0x1p-1022
	}
	return p * math.Float64frombits(uint64(e)<<52)
}
