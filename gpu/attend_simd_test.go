package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
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
