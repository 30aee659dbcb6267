package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// fmaCases runs f on random score cases of both stores over group counts
// and row counts that leave a tail after the 4-row unroll, with several
// anchor blocks.
func fmaCases(t *testing.T, f func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32)) {
	r := rand.New(rand.NewPCG(16, 4))
	for _, dtype := range []string{CacheDTypeBF16, CacheDTypeInt8} {
		for g := 1; g <= 17; g += 2 {
			for _, n := range []int{1, 4, 5, 33, 70, 101} {
				nq := 1 + (g+n)%scoreTile
				t.Run(fmt.Sprintf("%s/g=%d/n=%d/q=%d", dtype, g, n, nq), func(t *testing.T) {
					c, rv, qks := randomScoreCase(r, dtype, n, g, nq)
					f(t, c, rv, qks)
				})
			}
		}
	}
}

// fmaBounds gives, for query q's entry of head h (0–11) and row i, the
// float64 distance from the flushed query to the decoded keys and
// fmaDotTolerance's one-sided bound.
func fmaBounds(c *contextFit, rv *rowView, qk []float32, h, i int) (ref, tol float64) {
	n, qw := c.n, c.g*quadWidth
	nb := (n + anchorBlock - 1) / anchorBlock
	qd, hh := h/quadHeads, h%quadHeads
	src := qk[qd*nb*qw+(i/anchorBlock)*qw:][:qw]
	k := portableKernel.decodeKeys(rv.s, qd, i, i+1, make([]float32, qw), make([]float32, c.g))
	for e := 2 * hh; e < qw; e += quadWidth {
		for cc := range 2 {
			d := float64(flushTiny(src[e+cc])) - float64(k[e+cc])
			ref += d * d
		}
	}
	return ref, fmaDotTolerance(k, src, hh) / 2
}

// TestFMADotTwinAccuracy holds the float32 dot form's Go twin to the
// float64 distance (within fmaDotTolerance's one-sided bound) and to the
// difference form (within that and the difference form's own rounding).
func TestFMADotTwinAccuracy(t *testing.T) {
	fmaCases(t, func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32) {
		got := runScores(c, fmaDotKernel, rv, qks)
		diff := runScores(c, portableKernel, rv, qks)
		n := c.n
		for q := range qks {
			for j := range got[q] {
				ref, tol := fmaBounds(c, rv, qks[q], j/n, j%n)
				v, d := float64(got[q][j]), float64(diff[q][j])
				if !(math.Abs(v-ref) <= tol) {
					t.Fatalf("query %d head %d row %d: %v, float64 %v (bound %.3g)", q, j/n, j%n, v, ref, tol)
				}
				if bound := tol + float64(2*c.g+4)*0x1p-24*d; !(math.Abs(v-d) <= bound) {
					t.Fatalf("query %d head %d row %d: dot form %v, difference form %v (bound %.3g)", q, j/n, j%n, v, d, bound)
				}
			}
		}
	})
}

// TestFMADotAssemblyMatchesTwin holds every kernel with the float32 dot
// form that this machine runs to the Go twin, within fmaDotTolerance, and
// reports how many entries are not bit-identical (the twin's float64 FMA
// can differ from VFMADD231PS's single rounding on a float32 tie).
func TestFMADotAssemblyMatchesTwin(t *testing.T) {
	var kernels []attendKernel
	for _, k := range attendKernels() {
		if k.scoreFMA != nil {
			kernels = append(kernels, k)
		}
	}
	if len(kernels) == 0 {
		t.Skip("this CPU has no AVX2 with FMA: no assembly to hold to the Go twin; TestFMADotTwinAccuracy checks the twin")
	}
	for _, kern := range kernels {
		var entries, differ int
		fmaCases(t, func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32) {
			want := runScores(c, fmaDotKernel, rv, qks)
			got := runScores(c, kern, rv, qks)
			n := c.n
			for q := range qks {
				for j := range want[q] {
					if kern.scoreBF16 != nil && rv.s.dtype == CacheDTypeBF16 {
						continue // the bf16 dot form: attend_bf16dot_test.go
					}
					entries++
					if math.Float32bits(got[q][j]) == math.Float32bits(want[q][j]) {
						continue
					}
					differ++
					_, tol := fmaBounds(c, rv, qks[q], j/n, j%n)
					if d := math.Abs(float64(got[q][j]) - float64(want[q][j])); !(d <= 2*tol) {
						t.Fatalf("%s: query %d head %d row %d = %v, Go twin %v (bound %.3g)", kern.name, q, j/n, j%n, got[q][j], want[q][j], 2*tol)
					}
				}
			}
		})
		t.Logf("%s: %d of %d entries differ from the Go twin's bits (all within bound)", kern.name, differ, entries)
	}
}
