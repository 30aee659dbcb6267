// Package largectxtest makes the synthetic tables gpu/largectx's tests,
// benchmark and reference harness (testdata/refbench) share, so that they
// measure the same data.
package largectxtest

import (
	"math"
	"math/rand/v2"
)

// Smooth is the engine benchmarks' kind of table: features uniform in
// [-2, 2), a smooth target of three of them plus a little noise, and the
// first feature missing in every 37th row.
func Smooth(n, f int, seed uint64) ([][]float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 37))
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		X[i] = make([]float64, f)
		for d := range X[i] {
			X[i][d] = 4*r.Float64() - 2
		}
		y[i] = math.Sin(2*X[i][0]) + 0.5*X[i][1%f]*X[i][1%f] + 0.3*X[i][f-1] + 0.1*(r.Float64()-0.5)
		if i%37 == 5 {
			X[i][0] = math.NaN()
		}
	}
	return X, y
}

// Regions is a table of two features whose target relates to them
// differently in each half of the feature space, with structure finer than
// a window spread over the whole space resolves: a window drawn from the
// region a query lies in sees that region's rows far more densely.
func Regions(n int, seed uint64) ([][]float64, []float64) {
	r := rand.New(rand.NewPCG(seed, 99))
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		x0, x1 := 6*r.Float64()-3, 6*r.Float64()-3
		X[i] = []float64{x0, x1}
		if x0 < 0 {
			y[i] = math.Sin(3*x1) + 0.5*math.Cos(2*x0)
		} else {
			y[i] = x1 * math.Cos(3*x0) / 2
		}
	}
	return X, y
}
