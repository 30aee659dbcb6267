package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// BenchmarkFitForest grows the readout's forest, out-of-bag predictions
// included, on 1,000 rows × 8 columns, as Fit does on the context; CPU
// time per forest is steadier than wall time on a shared machine.
func BenchmarkFitForest(b *testing.B) {
	X, y := synth(1000, 8, 21)
	z := make([]float64, 0, len(X)*8)
	for _, x := range X {
		z = append(z, x...)
	}
	oob := make([]float64, len(y))
	cpu0 := cpuSeconds()
	for b.Loop() {
		if _, err := fitForest(context.Background(), z, len(y), 8, y, oob); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-cpu0)*1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkReadoutRow scores every non-solve head of the four layers on
// one query's distances to 1,000 rows, as Fit's leave-one-out scoring does
// for each scored row.
func BenchmarkReadoutRow(b *testing.B) {
	const n = 1000
	X, y := synth(n, 8, 21)
	for _, x := range X {
		for d, v := range x {
			if math.IsNaN(v) {
				x[d] = 0 // as Fit's preprocessing fills a missing value
			}
		}
	}
	dA, dI := newRowDists(n), newRowDists(n)
	for j := range n {
		dA.base[j] = sqDist(X[0], X[j], []float64{1, 1, 1, 1, 1, 1, 1, 1})
		dI.base[j] = 0.7 * dA.base[j]
	}
	var layers [4][headsPerLayer]head
	for l, ls := range []layerSpec{layerSolve, layerSmooth, layerLocal, layerTopK} {
		for h, spec := range ls {
			layers[l][h] = head{spec: spec, sf2: 1, values: y}
		}
	}
	buf := make([]float64, 2*n)
	var sink float64
	for b.Loop() {
		dA.reset(0)
		dI.reset(0)
		for l := range layers {
			layerOutputs64(&layers[l], dA, dI, buf, true, func(h int, v float64) { sink += v })
		}
	}
	_ = sink
}

// BenchmarkFitCPU is BenchmarkFit at 1,000 and 2,000 rows × 8 columns with
// the process's CPU time per Fit, the figure the readout's work is judged
// by on a shared machine.
func BenchmarkFitCPU(b *testing.B) {
	for _, n := range []int{1000, 2000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			X, y := synth(n, 8, 21)
			cpu0 := cpuSeconds()
			for b.Loop() {
				r, err := NewRegressor(DefaultModel)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Fit(context.Background(), X, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}
