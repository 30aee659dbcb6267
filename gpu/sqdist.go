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
