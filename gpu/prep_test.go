package gpu

import (
	"math"
	"testing"
)

// TestMissingnessIndicatorOnlyForMostlyMissingColumns checks that a column
// gains a missingness indicator only when at least minIndicatorShare of the
// context's rows miss it: a few imputed cells get none.
func TestMissingnessIndicatorOnlyForMostlyMissingColumns(t *testing.T) {
	const n = 100
	for _, tc := range []struct {
		name    string
		missing int // rows of column 0 that are missing
		want    int // columns after preprocessing
	}{
		{"none missing", 0, 2},
		{"a few missing", 5, 2},
		{"just under the share", int(minIndicatorShare*n) - 1, 2},
		{"at the share", int(minIndicatorShare * n), 3},
		{"most missing", 90, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			X := make([][]float64, n)
			y := make([]float64, n)
			for i := range X {
				X[i] = []float64{float64(i % 7), float64(i % 11)}
				if i < tc.missing {
					X[i][0] = math.NaN()
				}
				y[i] = float64(i)
			}
			pp, z, _, err := fitPrep(X, y)
			if err != nil {
				t.Fatal(err)
			}
			if got := pp.outDim; got != tc.want {
				t.Fatalf("columns after preprocessing = %d, want %d", got, tc.want)
			}
			if got, want := len(z), n*tc.want; got != want {
				t.Fatalf("len(z) = %d, want %d", got, want)
			}
			// A missing query cell is imputed whatever the indicator.
			zq, err := pp.transform([][]float64{{math.NaN(), 3}})
			if err != nil {
				t.Fatal(err)
			}
			for d, v := range zq {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("query column %d = %v", d, v)
				}
			}
		})
	}
}
