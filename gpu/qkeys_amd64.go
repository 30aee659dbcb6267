//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// queryKeysAVX2Asm is queryKeys for one query on AVX2 (its comment in the
// assembly has the layout).
//
//go:noescape
func queryKeysAVX2Asm(qk *float32, x, anchors, inv, diff *float64, nb, f, groups int)

// qkeysHasAVX2 says queryKeysAVX2 can run here; a variable so that tests
// can compare it with the Go keys.
var qkeysHasAVX2 = cpu.X86.HasAVX2

// queryKeysAVX2 writes queryKeys' output with queryKeysAVX2Asm, the same
// bits as keysAt (TestQueryKeysAVX2BitIdentical), and reports whether it
// ran: with AVX2 and a vector score kernel (a forced portable kernel,
// REGRESSD_SCORE_KERNEL=go, runs the Go keys too). The keys relative to
// every anchor block were a third of a forward pass at 10,000 context rows
// on a CPU without AVX-512F, where queryKeysFast does not run.
func (c *contextFit) queryKeysAVX2(l int, x []float64, qk []float32) bool {
	f, g := c.f, c.g
	if !qkeysHasAVX2 || archKernel.name == portableKernel.name || f < 1 || f > maxFastFeatures {
		return false
	}
	nb := len(c.anchors) / f
	if nb == 0 {
		return true
	}
	var inv [quads * (maxFastFeatures + 1) / 2 * quadWidth]float64
	c.invLanes(l, inv[:quads*g*quadWidth])
	var diff [maxFastFeatures + 1]float64 // diff[f] stays 0: an odd last pair's missing half
	// The assembly writes quads·nb·g·8 float32 and reads f of x, nb·f of
	// the anchors; check the extremes here.
	_, _, _ = qk[quads*nb*g*quadWidth-1], x[f-1], c.anchors[nb*f-1]
	queryKeysAVX2Asm(&qk[0], &x[0], &c.anchors[0], &inv[0], &diff[0], nb, f, g)
	return true
}
