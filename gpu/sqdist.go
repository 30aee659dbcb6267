package gpu

// sqDistAcc adds to dst[j] the weighted squared difference of src[j] from c,
// ((src[j]−c)·(src[j]−c))·w, for every j < len(dst): one feature of the
// squared distances from one row to many, stored feature by feature. Summed
// over the features in order from zero, it gives each distance the bits of
// a loop over the pair's features adding (t·t)·w (gpValue's kernel), eight
// (or four) rows a step. Every path
// multiplies and adds as the Go loop does (no FMA), so all are bit-identical
// (TestSqDistAccPaths).
func sqDistAcc(dst, src []float64, c, w float64) {
	n := len(dst)
	src = src[:n]
	m := 0
	switch {
	case n > 0 && sqDistHasAVX512:
		m = n
		sqDistAccAVX512(&dst[0], &src[0], n, c, w)
	case n >= 4 && sqDistHasAVX2:
		m = n &^ 3
		sqDistAccAVX2(&dst[0], &src[0], m, c, w)
	}
	for j := m; j < n; j++ {
		t := src[j] - c
		dst[j] += t * t * w
	}
}

// sqDistScaledAcc adds to dst[j] the squared scaled difference of src[j]
// from c, ((src[j]−c)·w)·((src[j]−c)·w): sqDist's term (w the inverse
// length scale), so summed over the features in order from zero it gives
// sqDist's bits, eight (or four) rows a step (TestSqDistAccPaths).
func sqDistScaledAcc(dst, src []float64, c, w float64) {
	n := len(dst)
	src = src[:n]
	m := 0
	switch {
	case n > 0 && sqDistHasAVX512:
		m = n
		sqDistScaledAccAVX512(&dst[0], &src[0], n, c, w)
	case n >= 4 && sqDistHasAVX2:
		m = n &^ 3
		sqDistScaledAccAVX2(&dst[0], &src[0], m, c, w)
	}
	for j := m; j < n; j++ {
		t := (src[j] - c) * w
		dst[j] += t * t
	}
}

// transpose returns the n×f row-major z stored feature by feature (f×n),
// for sqDistAcc and sqDistScaledAcc.
func transpose(z []float64, n, f int) []float64 {
	zt := make([]float64, f*n)
	for i := range n {
		for d := range f {
			zt[d*n+i] = z[i*f+d]
		}
	}
	return zt
}

// wsqSum is Σ_j c[j]·(x[j]−z)² over j < len(c): one feature's share of the
// GP gradient for one row, the weights c over the rows before it. The
// AVX-512 path sums in eight-lane FMA pairs, the Go loop in four running
// sums, so the two differ by rounding (TestWsqSumPaths bounds both against
// an exact sum).
func wsqSum(c, x []float64, z float64) float64 {
	n := len(c)
	if n == 0 {
		return 0
	}
	x = x[:n]
	if sqDistHasAVX512 {
		return wsqSumAVX512(&c[0], &x[0], n, z)
	}
	var s0, s1, s2, s3 float64
	j := 0
	for ; j+4 <= n; j += 4 {
		t0, t1, t2, t3 := x[j]-z, x[j+1]-z, x[j+2]-z, x[j+3]-z
		s0 += c[j] * (t0 * t0)
		s1 += c[j+1] * (t1 * t1)
		s2 += c[j+2] * (t2 * t2)
		s3 += c[j+3] * (t3 * t3)
	}
	for ; j < n; j++ {
		t := x[j] - z
		s0 += c[j] * (t * t)
	}
	return (s0 + s1) + (s2 + s3)
}
