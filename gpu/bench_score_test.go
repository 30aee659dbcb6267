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
		// One tile's planes, written by every tile in turn, as forward's
		// pooled piece buffer is (a plane per query of all 64, 31 MB at
		// D = 96, is memory no pass of forward writes).
		d2s := make([][]float32, scoreTile)
		for q := range d2s {
			d2s[q] = make([]float32, n*headsPerLayer)
		}
		for _, kern := range append(attendKernels(), fmaDotKernel, bf16DotKernel) {
			b.Run(fmt.Sprintf("D=%d/kernel=%s", g*headWidth, kern.name), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for range b.N {
					for lo := 0; lo < nq; lo += scoreTile {
						c.scoresWith(kern, rv, qks[lo:lo+scoreTile], d2s)
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

// BenchmarkScoreInt8 is BenchmarkScore on an int8 store, for the kernels
// this machine runs but go and the dot forms.
func BenchmarkScoreInt8(b *testing.B) {
	const n, nq = 10000, 64
	for _, g := range []int{4, 16} {
		r := rand.New(rand.NewPCG(1, uint64(g)))
		c, rv, qks := randomScoreCase(r, CacheDTypeInt8, n, g, nq)
		d2s := make([][]float32, scoreTile)
		for q := range d2s {
			d2s[q] = make([]float32, n*headsPerLayer)
		}
		for _, kern := range attendKernels() {
			if kern.name == portableKernel.name || kern.scoreFMA != nil || kern.scoreBF16 != nil {
				continue
			}
			b.Run(fmt.Sprintf("D=%d/kernel=%s", g*headWidth, kern.name), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for range b.N {
					for lo := 0; lo < nq; lo += scoreTile {
						c.scoresWith(kern, rv, qks[lo:lo+scoreTile], d2s)
					}
				}
				coords := float64(b.N) * nq * n * float64(g*headWidth)
				b.ReportMetric(coords/b.Elapsed().Seconds()/1e9, "Gcoord/s")
				if cpu := cpuSeconds() - cpu0; cpu > 0 {
					b.ReportMetric(coords/cpu/1e9, "Gcoord/cpu-s")
				}
			})
		}
	}
}

// BenchmarkTileKeys is the tiled kernels' once-per-layer-view cost on
// BenchmarkScore's store: a bf16 store's keys transposed into tiles
// (tiledKeys, the tiles' allocation included), in Gcoord/s of the
// store's keys (n·D) and per CPU second, comparable with BenchmarkScore's
// rate for one query.
func BenchmarkTileKeys(b *testing.B) {
	const n = 10000
	for _, g := range []int{4, 16} {
		r := rand.New(rand.NewPCG(1, uint64(g)))
		_, rv, _ := randomScoreCase(r, CacheDTypeBF16, n, g, 1)
		twin := portableKernel
		twin.name, twin.tile = "go", tileBF16Go
		kernels := []attendKernel{twin}
		for _, k := range attendKernels() {
			if k.tile != nil {
				kernels = append(kernels, k)
			}
		}
		for _, kern := range kernels {
			b.Run(fmt.Sprintf("D=%d/kernel=%s", g*headWidth, kern.name), func(b *testing.B) {
				cpu0 := cpuSeconds()
				for range b.N {
					(&rowView{s: rv.s}).tiledKeys(kern)
				}
				coords := float64(b.N) * n * float64(g*headWidth)
				b.ReportMetric(coords/b.Elapsed().Seconds()/1e9, "Gcoord/s")
				if cpu := cpuSeconds() - cpu0; cpu > 0 {
					b.ReportMetric(coords/cpu/1e9, "Gcoord/cpu-s")
				}
			})
		}
	}
}

// BenchmarkScoreTile is BenchmarkScore's case side by side on the loop
// before chunks (loop=blocks: scoresWithBlocks or scoresFMABlocks, tiles of
// 4 as main ran them) and scoresWith (loop=chunks) at tiles of 4 and 16,
// for the AVX2 kernels of both forms this machine runs.
func BenchmarkScoreTile(b *testing.B) {
	const n, nq = 10000, 64
	for _, g := range []int{4, 16} {
		r := rand.New(rand.NewPCG(1, uint64(g)))
		c, rv, qks := randomScoreCase(r, CacheDTypeBF16, n, g, nq)
		d2s := make([][]float32, scoreTile) // one tile's planes, as BenchmarkScore
		for q := range d2s {
			d2s[q] = make([]float32, n*headsPerLayer)
		}
		for _, kern := range attendKernels() {
			if kern.name == portableKernel.name || kern.scoreBF16 != nil {
				continue
			}
			blocks := c.scoresWithBlocks
			if kern.scoreFMA != nil {
				blocks = c.scoresFMABlocks
			}
			for _, lp := range []struct {
				name string
				tile int
				f    func(attendKernel, *rowView, [][]float32, [][]float32)
			}{{"blocks", 4, blocks}, {"chunks", 4, c.scoresWith}, {"chunks", 16, c.scoresWith}} {
				b.Run(fmt.Sprintf("D=%d/kernel=%s/loop=%s/tile=%d", g*headWidth, kern.name, lp.name, lp.tile), func(b *testing.B) {
					cpu0 := cpuSeconds()
					for range b.N {
						for lo := 0; lo < nq; lo += lp.tile {
							lp.f(kern, rv, qks[lo:lo+lp.tile], d2s[:lp.tile])
						}
					}
					coords := float64(b.N) * nq * n * float64(g*headWidth)
					b.ReportMetric(coords/b.Elapsed().Seconds()/1e9, "Gcoord/s")
					if cpu := cpuSeconds() - cpu0; cpu > 0 {
						b.ReportMetric(coords/cpu/1e9, "Gcoord/cpu-s")
					}
				})
			}
		}
	}
}

// scoresWithBlocks is the difference form's loop before chunks (main at
// 04e7644): the whole tile scored block by block, each query's slices for
// the quad flushed up front. BenchmarkScoreTile runs it beside scoresWith,
// and TestScoresChunksMatchBlocks holds scoresWith to its bits.
func (c *contextFit) scoresWithBlocks(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := rv.s.rows, c.g, c.g*quadWidth // c.n, or a staged slice's rows
	s := rv.s
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw // one query's slices for one quad
	qs := make([]float32, len(qks)*pw)
	k := make([]float32, anchorBlock*qw)
	scale := make([]float32, anchorBlock*g)
	for qd := range quads {
		for t, qk := range qks {
			kern.flush(qs[t*pw:(t+1)*pw], qk[qd*pw:(qd+1)*pw])
		}
		for lo := 0; lo < n; lo += anchorBlock {
			hi := min(lo+anchorBlock, n)
			kb := kern.decodeKeys(s, qd, lo, hi, k, scale)
			off := (lo / anchorBlock) * qw
			for t := range qks {
				kern.score(kb, qs[t*pw+off:][:qw], d2s[t][qd*quadHeads*n:], n, lo)
			}
		}
	}
}

// scoresFMABlocks is scoresFMA before chunks (main at 04e7644, reading the
// rows from rv), which TestScoresChunksMatchBlocks holds scoresFMA to.
func (c *contextFit) scoresFMABlocks(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := rv.s.rows, c.g, c.g*quadWidth
	s := rv.s
	kn := rv.fmaKeyNorms()
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw
	qs := make([]float32, len(qks)*pw)
	qn := make([]float32, len(qks)*nb*quadHeads)
	k := make([]float32, anchorBlock*qw)
	scale := make([]float32, anchorBlock*g)
	for qd := range quads {
		for t, qk := range qks {
			kern.flush(qs[t*pw:(t+1)*pw], qk[qd*pw:(qd+1)*pw])
			for b := range nb {
				sq := sumSquaresByHead(qs[t*pw+b*qw : t*pw+(b+1)*qw])
				copy(qn[(t*nb+b)*quadHeads:], sq[:])
			}
		}
		for lo := 0; lo < n; lo += anchorBlock {
			hi := min(lo+anchorBlock, n)
			kb := kern.decodeKeys(s, qd, lo, hi, k, scale)
			b := lo / anchorBlock
			qt := func(t int) []float32 { return qs[t*pw+b*qw:][:qw] }
			nt := func(t int) []float32 { return qn[(t*nb+b)*quadHeads:][:quadHeads] }
			t := 0
			if kern.scoreFMA2 != nil {
				for ; t+1 < len(qks); t += 2 {
					kern.scoreFMA2(kb, qt(t), qt(t+1), nt(t), nt(t+1), kn[qd],
						d2s[t][qd*quadHeads*n:], d2s[t+1][qd*quadHeads*n:], n, lo)
				}
			}
			for ; t < len(qks); t++ {
				kern.scoreFMA(kb, qt(t), nt(t), kn[qd], d2s[t][qd*quadHeads*n:], n, lo)
			}
		}
	}
}
