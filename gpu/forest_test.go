package gpu

import (
	"context"
	"math"
	"runtime"
	"slices"
	"testing"
)

// forestData is n rows of f standardised-like features in [−2, 2] with a
// smooth target of the first two (nearly noise-free).
func forestData(n, f int, seed uint64) ([]float64, []float64) {
	X, y := synth(n, f, seed)
	z := make([]float64, n*f)
	for i, row := range X {
		for d, v := range row {
			if math.IsNaN(v) {
				v = 0
			}
			z[i*f+d] = v
		}
	}
	return z, y
}

// TestForestStaysInTargetRange: a forest averages context targets, so even
// a query far outside the context predicts within their range.
func TestForestStaysInTargetRange(t *testing.T) {
	n, f := 300, 4
	z, y := forestData(n, f, 1)
	fo, err := fitForest(context.Background(), z, n, f, y, nil)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := slices.Min(y), slices.Max(y)
	for i := range n {
		q := make([]float64, f)
		for d := range f {
			q[d] = 25 * z[i*f+d] // far outside [−2, 2]
		}
		if p := fo.predict(q); p < lo || p > hi {
			t.Fatalf("query %d: %g outside the targets' range [%g, %g]", i, p, lo, hi)
		}
	}
}

// TestForestOutOfBag: the out-of-bag predictions score about like fresh
// queries. Trees drawn from overlapping random streams share their samples,
// which left each row out of the same few trees and took the out-of-bag R²
// to 0.41 where fresh queries had 0.95.
func TestForestOutOfBag(t *testing.T) {
	n, f := 500, 3
	z, y := forestData(n, f, 2)
	zq, yq := forestData(500, f, 3)
	oob := make([]float64, n)
	fo, err := fitForest(context.Background(), z, n, f, y, oob)
	if err != nil {
		t.Fatal(err)
	}
	pq := make([]float64, len(yq))
	for q := range pq {
		pq[q] = fo.predict(zq[q*f : (q+1)*f])
	}
	rOOB, rTest := r2(y, oob), r2(yq, pq)
	if rTest < 0.85 || math.Abs(rOOB-rTest) > 0.05 {
		t.Fatalf("out-of-bag R² %.3f, fresh queries %.3f: want both above 0.85 and within 0.05", rOOB, rTest)
	}
}

// TestForestDeterministic: each tree draws from its own stream, so the
// forest is the same however many cores grew it.
func TestForestDeterministic(t *testing.T) {
	n, f := 400, 5
	z, y := forestData(n, f, 4)
	grow := func(procs int) (*forest, []float64) {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		oob := make([]float64, n)
		fo, err := fitForest(context.Background(), z, n, f, y, oob)
		if err != nil {
			t.Fatal(err)
		}
		return fo, oob
	}
	f1, o1 := grow(1)
	f4, o4 := grow(4)
	if !slices.Equal(f1.nodes, f4.nodes) || !slices.Equal(f1.roots, f4.roots) {
		t.Fatal("the forest differs between 1 and 4 cores")
	}
	sameBits(t, "out-of-bag, 1 vs 4 cores", o1, o4)
}

// TestLeanOnForest: the lean is the forest's least-squares share on the
// held-out rows — all of it when the forest predicts them exactly, none
// when the readout does, half when their errors are opposite and equal —
// and it moves queries inside the context's range only.
func TestLeanOnForest(t *testing.T) {
	m := 100
	nc := 2 + headsPerLayer // trend, one layer of heads, the forest
	wiggle := func(a int) float64 { return 0.3 * math.Sin(float64(7*a)) }
	for _, tc := range []struct {
		name          string
		trend, forest func(a int, y float64) float64
		want          float64
	}{
		{"forest exact", func(a int, y float64) float64 { return y + wiggle(a) }, func(a int, y float64) float64 { return y }, 1},
		{"readout exact", func(a int, y float64) float64 { return y }, func(a int, y float64) float64 { return y + wiggle(a) }, 0},
		{"opposite errors", func(a int, y float64) float64 { return y - wiggle(a) }, func(a int, y float64) float64 { return y + wiggle(a) }, 0.5},
	} {
		held := func(blocks bool) *heldOut {
			h := &heldOut{cands: make([][]float64, nc)}
			for k := range h.cands {
				h.cands[k] = make([]float64, m)
			}
			for a := range m {
				y := math.Cos(float64(a) / 9)
				h.target = append(h.target, y)
				h.rows = append(h.rows, a)
				h.cands[0][a] = tc.trend(a, y)
				h.cands[nc-1][a] = tc.forest(a, y)
				if blocks {
					h.block = append(h.block, a*blockCV/m)
					h.dist = append(h.dist, 0)
					h.beyond = append(h.beyond, false)
				}
			}
			if blocks {
				h.extra = [2][]float64{make([]float64, m), make([]float64, m)}
			}
			return h
		}
		far := &farReadout{trendW: 0.6, w: make([][headsPerLayer]float64, 1)}
		c := &contextFit{trendW: 1, layers: make([][headsPerLayer]head, 1), edge: &edgeModel{beyond: far, gap: far}}
		c.fo = &forest{nodes: []forestNode{{feat: -1, value: 2}}, roots: []int32{0}}
		c.leanOnForest(held(false), held(true))
		if math.Abs(c.edge.lean-tc.want) > 1e-9 {
			t.Errorf("%s: lean %g, want %g", tc.name, c.edge.lean, tc.want)
		}
		in, out := c.leaned(queryEdge{}, nil, 1), c.leaned(queryEdge{beyond: true}, nil, 1)
		if math.Abs(in-(1+tc.want)) > 1e-9 || out != 1 {
			t.Errorf("%s: a readout of 1 and a forest of 2 give %g inside and %g past the range; want %g and 1", tc.name, in, out, 1+tc.want)
		}
	}
}
