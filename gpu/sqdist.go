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
