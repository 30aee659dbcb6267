//go:build amd64 && !purego

package gpu

// queryKeysAsm is queryKeys for one query (its comment in the assembly has
// the layout).
//
//go:noescape
func queryKeysAsm(qk *float32, x, anchors, inv, diff *float64, nb, f, groups, last int)

// maxFastFeatures bounds the features queryKeysFast takes (its buffers are
// on the stack).
const maxFastFeatures = 64

// queryKeysFast writes queryKeys' output with queryKeysAsm, the same bits
// as keysAt (TestQueryKeysFastBitIdentical), and reports whether it ran:
// only where the score kernel is a tiled one (AVX-512F, self-checked), so
// a forced kernel (REGRESSD_SCORE_KERNEL=go or avx2) runs the Go keys too.
func (c *contextFit) queryKeysFast(l int, x []float64, qk []float32) bool {
	f, g := c.f, c.g
	if archKernel.scoresTiled == nil || f < 1 || f > maxFastFeatures {
		return false
	}
	nb := len(c.anchors) / f
	if nb == 0 {
		return true
	}
	var inv [quads * (maxFastFeatures + 1) / 2 * quadWidth]float64
	c.invLanes(l, inv[:quads*g*quadWidth])
	var diff [maxFastFeatures]float64
	chunks := (f + 7) / 8
	last := 1<<(f-8*(chunks-1)) - 1
	// The assembly writes quads·nb·g·8 float32 and reads f of x, nb·f of
	// the anchors; check the extremes here.
	_, _, _ = qk[quads*nb*g*quadWidth-1], x[f-1], c.anchors[nb*f-1]
	queryKeysAsm(&qk[0], &x[0], &c.anchors[0], &inv[0], &diff[0], nb, f, g, last)
	return true
}
