package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScore is the score pass on one core, beside OpenBLAS sgemm of
// the same shape (scripts/sgemm_bench.sh runs both in one go): 64 queries
// against n = 10,000 bf16 rows of D = 24·g coordinates (g = 4 groups for
// 8 features, 16 for 32), in tiles of scoreTile as Predict runs them. It
// reports Gcoord/s (query-row-coordinate triples a second, what sgemm's
// GFLOP/s is twice of) and the kernel's own GFLOP/s: 3 a coordinate for the
// difference form (subtract, multiply, add), 2 for the float32 dot form
// (a fused multiply-add), 4 for the bf16 one (a bf16 multiply-add for each
// of the query's two halves), and Gcoord per CPU
// second of the process (run with -cpu 1: steadier than wall time on a
// loaded machine; GC counts in it). Each kernel this
// machine runs is measured, and the Go twins of the dot forms.
func BenchmarkScore(b *testing.B) {
	const n, nq = 10000, 64
	for _, g := range []int{4, 16} {
		r := rand.New(rand.NewPCG(1, uint64(g)))
		c, rv, qks := randomScoreCase(r, CacheDTypeBF16, n, g, nq)
		d2s := make([][]float32, nq)
		for q := range d2s {
			d2s[q] = make([]float32, n*headsPerLayer)
		}
		for _, kern := range append(attendKernels(), fmaDotKernel, bf16DotKernel) {
			b.Run(fmt.Sprintf("D=%d/kernel=%s", g*headWidth, kern.name), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for range b.N {
					for lo := 0; lo < nq; lo += scoreTile {
						c.scoresWith(kern, rv, qks[lo:lo+scoreTile], d2s[lo:lo+scoreTile])
					}
				}
				coords := float64(b.N) * nq * n * float64(g*headWidth)
				perCoord := 3.0
				switch {
				case kern.scoreBF16 != nil:
					perCoord = 4
				case kern.scoreFMA != nil:
					perCoord = 2
				}
				b.ReportMetric(coords/b.Elapsed().Seconds()/1e9, "Gcoord/s")
				b.ReportMetric(perCoord*coords/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				if cpu := cpuSeconds() - cpu0; cpu > 0 {
					b.ReportMetric(coords/cpu/1e9, "Gcoord/cpu-s")
				}
			})
		}
	}
}
