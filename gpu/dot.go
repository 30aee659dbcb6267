package gpu

// dot4 is four dot products sharing a (b0…b3 at least as long as a), each
// summed in dot's order, so each equals dot(a, bk) to the bit. It is the
// inner loop of the Cholesky factor's trailing update and of invFull:
// loading a once for four products, and four independent accumulators,
// is where a vector unit pays.
func dot4(a, b0, b1, b2, b3 []float64) (d0, d1, d2, d3 float64) {
	m := len(a) &^ 3
	if m == 0 || !dot4Vector {
		return dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3)
	}
	b0, b1, b2, b3 = b0[:len(a)], b1[:len(a)], b2[:len(a)], b3[:len(a)]
	var lanes [16]float64
	dot4Lanes(&a[0], &b0[0], &b1[0], &b2[0], &b3[0], m, &lanes)
	return dotTail(lanes[0:4], a, b0, m), dotTail(lanes[4:8], a, b1, m),
		dotTail(lanes[8:12], a, b2, m), dotTail(lanes[12:16], a, b3, m)
}

// dotTail finishes dot(a, b) from its four running sums over a[:m]: the
// rest goes into the first sum, then the sums are added as dot adds them.
func dotTail(s []float64, a, b []float64, m int) float64 {
	s0 := s[0]
	for i := m; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s[1]) + (s[2] + s[3])
}

// dot2x4 is the eight dot products of a0 and a1 (equal lengths) with
// b0…b3 (at least as long), each summed in dot's order, so d[r][k] equals
// dot(ar, bk) to the bit. Two rows against four share every load of the
// b's, and eight running sums hide the adds' latency: the Cholesky
// factor's trailing update and invFull pair rows with it.
func dot2x4(a0, a1, b0, b1, b2, b3 []float64) (d [2][4]float64) {
	m := len(a0) &^ 3
	a1 = a1[:len(a0)]
	if m == 0 || !dot4Vector {
		d[0][0], d[0][1], d[0][2], d[0][3] = dot4(a0, b0, b1, b2, b3)
		d[1][0], d[1][1], d[1][2], d[1][3] = dot4(a1, b0, b1, b2, b3)
		return d
	}
	b0, b1, b2, b3 = b0[:len(a0)], b1[:len(a0)], b2[:len(a0)], b3[:len(a0)]
	var lanes [32]float64
	dot2x4Lanes(&a0[0], &a1[0], &b0[0], &b1[0], &b2[0], &b3[0], m, &lanes)
	for k, b := range [4][]float64{b0, b1, b2, b3} {
		d[0][k] = dotTail(lanes[4*k:4*k+4], a0, b, m)
		d[1][k] = dotTail(lanes[16+4*k:16+4*k+4], a1, b, m)
	}
	return d
}
