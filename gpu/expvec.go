package gpu

import "math"

// expTable is expNeg's constants, each repeated in four lanes, for the
// vector kernel (expvec_amd64.s): the same float64 values the Go code
// uses, so both give the same bits.
var expTable = [...][4]float64{
	lanes4(math.Log2E), lanes4(0.5), lanes4(6.93147180369123816490e-01), lanes4(1.90821492927058770002e-10), lanes4(-708),
	// Taylor coefficients, innermost first.
	lanes4(1.0 / 40320), lanes4(1.0 / 5040), lanes4(1.0 / 720), lanes4(1.0 / 120), lanes4(1.0 / 24),
	lanes4(1.0 / 6), lanes4(1.0 / 2), lanes4(1), lanes4(1),
}

func lanes4(v float64) [4]float64 { return [4]float64{v, v, v, v} }

// expScaled sets dst[j] = expNeg(s·(src[j] − off)) for every j of dst (src
// at least as long), eight at a time in AVX-512 or four in AVX2 where the
// CPU has them: the attention weights of a whole row of keys at once. The
// vector paths give expScaledGo's bits (TestExpScaledBitIdentical).
func expScaled(dst, src []float64, s, off float64) {
	src = src[:len(dst)]
	n := 0
	if expVector512 {
		n = len(dst) &^ 7
		if n > 0 {
			expScaledAVX512(&dst[0], &src[0], n, s, off, &expTable)
		}
	}
	if expVector {
		if m := (len(dst) - n) &^ 3; m > 0 {
			expScaledAsm(&dst[n], &src[n], m, s, off, &expTable)
			n += m
		}
	}
	expScaledGo(dst[n:], src[n:], s, off)
}

// expScaledGo is expScaled in Go, the vector kernel's twin.
func expScaledGo(dst, src []float64, s, off float64) {
	src = src[:len(dst)]
	for j, v := range src {
		dst[j] = expNeg(s * (v - off))
	}
}
