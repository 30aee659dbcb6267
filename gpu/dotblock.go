package gpu

// dotBlock is the micro-kernel of the blocked factorisations (linalg.go):
// the 4×4 block of dot products out[4r+c] = Σ_{t<k} a[r][t]·b[c][t]. Four
// rows against four share every load, and sixteen independent sums (FMA in
// the vector paths) keep the multiply-add units busy instead of waiting on
// one running sum's latency (the dot4 kernel it replaced kept one per
// product, in dot's lane order, for dot's bits).
//
// The sums' order depends on the path (AVX-512: eight lanes, AVX2: four,
// Go: one running sum per product, no FMA), so results differ between
// machines by rounding only: TestDotBlockPaths bounds each path against an
// exact sum. Within one machine the path is fixed, so the bits do not
// depend on cores.
func dotBlock(a, b *[4][]float64, k int, out *[16]float64) {
	for r := range 4 {
		a[r] = a[r][:k]
		b[r] = b[r][:k]
	}
	m := 0
	switch {
	case k > 0 && dotBlockHasAVX512:
		m = k
		dotBlockAVX512(&a[0][0], &a[1][0], &a[2][0], &a[3][0], &b[0][0], &b[1][0], &b[2][0], &b[3][0], k, out)
	case k >= 4 && dotBlockHasFMA:
		m = k &^ 3
		dotBlockFMA(&a[0][0], &a[1][0], &a[2][0], &a[3][0], &b[0][0], &b[1][0], &b[2][0], &b[3][0], m, out)
	default:
		*out = [16]float64{}
	}
	if m < k {
		dotBlockGo(a, b, m, k, out)
	}
}

// dotBlockGo adds to out the products of t in [lo, hi): the tail of a vector
// path, or the whole block where there is none. Each row keeps four
// running sums, one per column, so a row of a is loaded once per step.
func dotBlockGo(a, b *[4][]float64, lo, hi int, out *[16]float64) {
	b0, b1, b2, b3 := b[0][:hi], b[1][:hi], b[2][:hi], b[3][:hi]
	for r := range 4 {
		ar := a[r][:hi]
		s0, s1, s2, s3 := out[4*r], out[4*r+1], out[4*r+2], out[4*r+3]
		for t := lo; t < hi; t++ {
			x := ar[t]
			s0 += x * b0[t]
			s1 += x * b1[t]
			s2 += x * b2[t]
			s3 += x * b3[t]
		}
		out[4*r], out[4*r+1], out[4*r+2], out[4*r+3] = s0, s1, s2, s3
	}
}
