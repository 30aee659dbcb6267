package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// randomScoreCase builds a store of n rows and g groups with random keys
// (some at the clamp, some zero, some around flushTiny's threshold or
// subnormal, some rows tiny throughout) and a tile of nq queries.
func randomScoreCase(r *rand.Rand, dtype string, n, g, nq int) (*contextFit, *rowView, [][]float32) {
	w := g * headWidth
	s := newLayerStore(dtype, n, g)
	k := make([]float32, w)
	key := func() float32 {
		switch r.IntN(16) {
		case 0:
			return 0
		case 1:
			return keyClamp * float32(1-2*r.IntN(2))
		case 2:
			return float32(math.Ldexp(r.NormFloat64(), -40))
		case 3:
			return float32(r.NormFloat64() * 1e-40)
		}
		return float32(r.NormFloat64() * 3)
	}
	for i := range n {
		scale := float32(1)
		if r.IntN(8) == 0 {
			scale = 0x1p-41
		}
		for e := range k {
			k[e] = key() * scale
		}
		s.putK(i, k)
	}
	nb := (n + anchorBlock - 1) / anchorBlock
	qks := make([][]float32, nq)
	for t := range qks {
		qks[t] = make([]float32, nb*w)
		for e := range qks[t] {
			qks[t][e] = key()
		}
	}
	return &contextFit{n: n, g: g}, &rowView{s: s}, qks
}

// runScores scores the tile with kern into fresh NaN-filled outputs, so a
// row a kernel forgets shows up.
func runScores(c *contextFit, kern attendKernel, rv *rowView, qks [][]float32) [][]float32 {
	d2s := make([][]float32, len(qks))
	for t := range d2s {
		d2s[t] = make([]float32, c.n*headsPerLayer)
		for i := range d2s[t] {
			d2s[t][i] = float32(math.NaN())
		}
	}
	c.scoresWith(kern, rv, qks, d2s)
	return d2s
}

// TestScoreKernelsBitIdentical holds every kernel this machine runs to the
// portable one's bits, over group counts, row counts that leave a tail after
// the unroll, one to four queries per tile, several anchor blocks and both
// storage types; and the portable one to a float64 reference.
func TestScoreKernelsBitIdentical(t *testing.T) {
	kernels := attendKernels()
	if len(kernels) == 1 {
		t.Logf("only the %s kernel runs here; checking it against the reference", kernels[0].name)
	}
	r := rand.New(rand.NewPCG(7, 11))
	for _, dtype := range []string{CacheDTypeBF16, CacheDTypeInt8} {
		for g := 1; g <= 17; g++ {
			for _, n := range []int{1, 3, 4, 5, 31, 33, 70, 101} {
				nq := 1 + (g+n)%scoreTile
				t.Run(fmt.Sprintf("%s/g=%d/n=%d/q=%d", dtype, g, n, nq), func(t *testing.T) {
					c, rv, qks := randomScoreCase(r, dtype, n, g, nq)
					want := runScores(c, portableKernel, rv, qks)
					checkReference(t, c, rv, qks, want)
					for _, kern := range kernels[1:] {
						if kern.scoreFMA != nil || kern.scoreBF16 != nil && dtype == CacheDTypeBF16 {
							continue // a dot form: attend_bf16dot_test.go, attend_fma_test.go
						}
						got := runScores(c, kern, rv, qks)
						for q := range want {
							for j := range want[q] {
								if gb, wb := math.Float32bits(got[q][j]), math.Float32bits(want[q][j]); gb != wb {
									t.Fatalf("%s: query %d head %d row %d = %v (%#x), go kernel %v (%#x)",
										kern.name, q, j/n, j%n, got[q][j], gb, want[q][j], wb)
								}
							}
						}
					}
				})
			}
		}
	}
}

// checkReference compares d2s with squared distances summed in float64 from
// the stored keys.
func checkReference(t *testing.T, c *contextFit, rv *rowView, qks, d2s [][]float32) {
	t.Helper()
	n, qw := c.n, c.g*quadWidth
	nb := (n + anchorBlock - 1) / anchorBlock
	k := make([]float32, c.g*headWidth)
	for i := range n {
		rv.s.getK(i, k)
		for q, qk := range qks {
			for h := range headsPerLayer {
				var ref, mag float64
				for g := range c.g {
					for cc := range 2 {
						e := slot(g, h, cc, c.g)
						// The query's slices are quad-major over the blocks.
						qe := float64(qk[(h/quadHeads)*nb*qw+(i/anchorBlock)*qw+e%qw])
						d := qe - float64(k[e])
						ref += d * d
						mag += qe*qe + float64(k[e])*float64(k[e])
					}
				}
				got := float64(d2s[q][h*n+i])
				if math.Abs(got-ref) > 1e-6*(mag+1) || math.IsNaN(got) {
					t.Fatalf("query %d head %d row %d = %v, want %v", q, h, i, got, ref)
				}
			}
		}
	}
}

// TestScoresIndependentOfTile checks that a query's distances do not depend
// on the other queries of its tile.
func TestScoresIndependentOfTile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	c, rv, qks := randomScoreCase(r, CacheDTypeBF16, 77, 5, scoreTile)
	for _, kern := range []attendKernel{archKernel, bf16DotKernel, fmaDotKernel} {
		tile := runScores(c, kern, rv, qks)
		for q := range qks {
			alone := runScores(c, kern, rv, qks[q:q+1])
			for j := range alone[0] {
				if math.Float32bits(alone[0][j]) != math.Float32bits(tile[q][j]) {
					t.Fatalf("%s: query %d entry %d: %v alone, %v in a tile", kern.name, q, j, alone[0][j], tile[q][j])
				}
			}
		}
	}
}

// TestScoresChunksMatchBlocks holds scoresWith (chunks of rows, a query at
// a time) to the loop before it (scoresWithBlocks: the whole tile block by
// block) on contexts of several chunks with a partial last chunk and block,
// on every kernel this machine runs but the bf16 dot forms (the float32 dot
// form against scoresFMABlocks) and both storage types: the order of the
// loops changed, no output's arithmetic, so the bits agree.
func TestScoresChunksMatchBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	for _, dtype := range []string{CacheDTypeBF16, CacheDTypeInt8} {
		for _, g := range []int{1, 4, 5, 16} {
			n := 3*scoreChunkFloats/(g*quadWidth) + 45 // three chunks and a partial one
			c, rv, qks := randomScoreCase(r, dtype, n, g, scoreTile+3)
			for _, kern := range append(attendKernels(), fmaDotKernel) {
				if kern.scoreBF16 != nil {
					continue
				}
				blocks := c.scoresWithBlocks
				if kern.scoreFMA != nil {
					blocks = c.scoresFMABlocks
				}
				want := make([][]float32, len(qks))
				for q := range want {
					want[q] = make([]float32, n*headsPerLayer)
				}
				for lo := 0; lo < len(qks); lo += minScoreTile {
					hi := min(lo+minScoreTile, len(qks))
					blocks(kern, rv, qks[lo:hi], want[lo:hi])
				}
				got := runScores(c, kern, rv, qks)
				for q := range want {
					for j := range want[q] {
						if gb, wb := math.Float32bits(got[q][j]), math.Float32bits(want[q][j]); gb != wb {
							t.Fatalf("%s/%s/g=%d: query %d head %d row %d = %v, blocks %v", dtype, kern.name, g, q, j/n, j%n, got[q][j], want[q][j])
						}
					}
				}
			}
		}
	}
}

// TestQueryTile checks the tile's bounds: never above scoreTile or below
// minScoreTile, small where the score planes would be large or the batch
// small, scoreTile for a large batch on a small context.
func TestQueryTile(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	if got := queryTile(1000*procs, 1000); got != scoreTile {
		t.Errorf("queryTile(%d, 1000) = %d, want %d", 1000*procs, got, scoreTile)
	}
	for _, tc := range []struct{ nq, rows int }{{1, 1}, {3, 10}, {1000, 1 << 20}, {0, 0}, {2 * scoreTile * procs, 1e6}} {
		got := queryTile(tc.nq, tc.rows)
		if got < minScoreTile || got > scoreTile {
			t.Errorf("queryTile(%d, %d) = %d, outside [%d, %d]", tc.nq, tc.rows, got, minScoreTile, scoreTile)
		}
		if got > minScoreTile && got*tc.rows*headsPerLayer*4 > scoreBufBytes {
			t.Errorf("queryTile(%d, %d) = %d: %d bytes of planes", tc.nq, tc.rows, got, got*tc.rows*headsPerLayer*4)
		}
	}
	if got := queryTile(1000, 1<<20); got != minScoreTile {
		t.Errorf("queryTile(1000, 1<<20) = %d, want %d", got, minScoreTile)
	}
}
