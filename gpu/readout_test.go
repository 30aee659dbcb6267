package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// headOutputScan is headOutput64 as it was before the shared neighbour
// list: every head scales its row, scans it for its nearest distance and
// selects its own neighbours (knnMean).
func headOutputScan(h *head, base []float64, skip int) float64 {
	n := len(base)
	d2, w := make([]float64, n), make([]float64, n)
	s := 1 / (h.spec.mult * h.spec.mult)
	for j, v := range base {
		d2[j] = v * s
	}
	switch h.spec.kind {
	case kindSolve:
		expScaled(w, d2, -0.5, 0)
		var out float64
		for j := range d2 {
			if j != skip {
				out += h.sf2 * w[j] * h.values[j]
			}
		}
		return out
	case kindSmooth:
		dmin := math.Inf(1)
		for j, v := range d2 {
			if j != skip {
				dmin = min(dmin, v)
			}
		}
		expScaled(w, d2, -0.5, dmin)
		var num, den float64
		for j, v := range d2 {
			if j != skip && v-dmin <= 2*farExp {
				num += w[j] * h.values[j]
				den += w[j]
			}
		}
		if den == 0 {
			return 0
		}
		return num / den
	case kindLocal:
		var left []float64
		for j, v := range base {
			if j != skip {
				left = append(left, v)
			}
		}
		if len(left) == 0 {
			return 0
		}
		slices.Sort(left)
		return localMean(d2, h.values, left[min(h.spec.k, len(left))-1]*s, skip, w)
	default: // kindTopK
		return knnMean(d2, h.values, h.spec.k, skip)
	}
}

// Every head of every layer, through one shared rowDists per query as the
// readout's scoring uses it, one by one and a layer at once, gives the
// bits of its own scan and selection:
// on distances with many ties (rows that tie past the 64 kept), at unit and
// other bandwidths, with and without a left-out row, down to one row.
func TestHeadOutputSharedNeighboursBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 5))
	layers := []layerSpec{layerSolve, layerSmooth, layerLocal, layerTopK}
	for trial := range 120 {
		n := []int{1, 2, 7, 40, 65, 130, 700}[trial%7]
		base, values := make([]float64, n), make([]float64, n)
		for j := range base {
			switch trial % 3 {
			case 0:
				base[j] = float64(rng.IntN(5)) // ties across the kept 64
			case 1:
				base[j] = rng.ExpFloat64() * 3
			default:
				base[j] = float64(rng.IntN(40)) * 0.37
			}
			values[j] = rng.NormFloat64()
		}
		mults := []float64{1, 1.7, 0.35}
		for _, skip := range []int{-1, 0, n / 2, n - 1} {
			rd := newRowDists(n)
			copy(rd.base, base)
			rd.reset(skip)
			buf := make([]float64, 2*n)
			dI := newRowDists(n)
			copy(dI.base, base)
			for j := range dI.base {
				dI.base[j] *= 0.6
			}
			dI.reset(skip)
			buf2 := make([]float64, 2*n)
			for _, ls := range layers {
				var hs [headsPerLayer]head
				for hi, spec := range ls {
					if trial%2 == 1 && spec.kind != kindSolve {
						spec.mult = mults[(trial+hi)%len(mults)]
					}
					hs[hi] = head{spec: spec, sf2: 1.3, values: values}
					h := &hs[hi]
					got := headOutput64(h, rd, buf)
					want := headOutputScan(h, base, skip)
					if math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("trial %d n=%d skip=%d head %+v: %v, scanning %v", trial, n, skip, spec, got, want)
					}
				}
				// The layer at once, in both metrics.
				seen := 0
				layerOutputs64(&hs, rd, dI, buf2, trial%4 == 1, func(h int, got float64) {
					seen++
					b := base
					if hs[h].spec.metric == metricISO {
						b = dI.base
					}
					if want := headOutputScan(&hs[h], b, skip); math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("trial %d n=%d skip=%d layer head %d %+v: %v, scanning %v", trial, n, skip, h, hs[h].spec, got, want)
					}
				})
				if want := headsPerLayer; trial%4 == 1 && ls[0].kind == kindSolve {
					want -= 2
					if seen != want {
						t.Fatalf("layer gave %d heads, want %d", seen, want)
					}
				} else if seen != want {
					t.Fatalf("layer gave %d heads, want %d", seen, want)
				}
			}
		}
	}
}

// rowSqDists, feature by feature, gives sqDist's bits row by row.
func TestRowSqDistsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 6))
	for _, nf := range [][2]int{{1, 1}, {9, 3}, {130, 8}, {257, 5}} {
		n, f := nf[0], nf[1]
		z, x := make([]float64, n*f), make([]float64, f)
		invA, invI := make([]float64, f), make([]float64, f)
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		for d := range f {
			x[d], invA[d], invI[d] = rng.NormFloat64(), rng.ExpFloat64(), 0.8
		}
		dA, dI := make([]float64, n), make([]float64, n)
		rowSqDists(dA, dI, transpose(z, n, f), x, invA, invI)
		for j := range n {
			zj := z[j*f : (j+1)*f]
			if a, b := sqDist(x, zj, invA), sqDist(x, zj, invI); math.Float64bits(a) != math.Float64bits(dA[j]) || math.Float64bits(b) != math.Float64bits(dI[j]) {
				t.Fatalf("n=%d f=%d row %d: %v %v, sqDist %v %v", n, f, j, dA[j], dI[j], a, b)
			}
		}
	}
}

// A NaN distance (no comparison places it) gives NaN or a wrong head
// output, as any selection would, but reads nothing outside the row.
func TestHeadOutputNaNDistance(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(16, 7))
	rd := newRowDists(n)
	values := make([]float64, n)
	for j := range n {
		rd.base[j], values[j] = rng.ExpFloat64(), rng.NormFloat64()
		if j%3 == 0 {
			rd.base[j] = math.NaN()
		}
	}
	rd.reset(-1)
	buf := make([]float64, 2*n)
	for _, ls := range []layerSpec{layerSolve, layerSmooth, layerLocal, layerTopK} {
		var hs [headsPerLayer]head
		for h, spec := range ls {
			hs[h] = head{spec: spec, sf2: 1, values: values}
		}
		layerOutputs64(&hs, rd, rd, buf, false, func(int, float64) {})
	}
}
