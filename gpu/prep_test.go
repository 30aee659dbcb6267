package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestGlitchIsMissing checks that one absurd feature value (a sensor's
// 1e300, a unit slip) is treated as missing instead of setting its
// column's scale: before, it made every prediction the same number.
func TestGlitchIsMissing(t *testing.T) {
	for _, glitch := range []float64{1e6, 1e20, 1e300, -1e9} {
		t.Run("", func(t *testing.T) {
			var X [][]float64
			var y []float64
			for i := range 100 {
				if i%10 == 0 {
					continue
				}
				x := float64(i)
				if i == 15 {
					x = glitch
				}
				X = append(X, []float64{x})
				y = append(y, 3*float64(i))
			}
			r, err := NewRegressor("regressd/model-2l")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Fit(t.Context(), X, y); err != nil {
				t.Fatal(err)
			}
			got, err := r.Predict(t.Context(), [][]float64{{0}, {50}, {95}})
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range []float64{0, 150, 285} {
				if math.Abs(got[k]-want) > 10 {
					t.Fatalf("glitch %g: predictions %v, want about [0 150 285]", glitch, got)
				}
			}
		})
	}
}

// TestGlitchBoundsKeepHeavyTails checks that the glitch bounds leave real
// columns alone: an exponential tail, a mostly-zero column (rain), a
// column with a few plain outliers, and too few rows to judge.
func TestGlitchBoundsKeepHeavyTails(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	exp, rain, outl := make([]float64, 2000), make([]float64, 2000), make([]float64, 2000)
	for i := range exp {
		exp[i] = r.ExpFloat64()
		if r.Float64() < 0.1 {
			rain[i] = 5 * r.ExpFloat64() * r.ExpFloat64()
		}
		outl[i] = r.NormFloat64()
	}
	outl[7], outl[9] = 60, -45 // 60 deviations: an outlier, not a glitch
	for name, col := range map[string][]float64{"exponential": exp, "rain": rain, "outliers": outl, "few": {0, 1, 1e300}} {
		s := slices.Clone(col)
		slices.Sort(s)
		lo, hi := glitchBounds(s)
		if s[0] < lo || s[len(s)-1] > hi {
			t.Errorf("%s: bounds [%g, %g] cut the column's own range [%g, %g]", name, lo, hi, s[0], s[len(s)-1])
		}
	}
	s := append(slices.Clone(exp), 1e7)
	slices.Sort(s)
	if _, hi := glitchBounds(s); !(hi < 1e7) {
		t.Errorf("exponential column with 1e7: upper bound %g keeps the glitch", hi)
	}
}

// dualAxes (fewer rows than columns) finds the covariance's principal axes
// and variances, up to each axis's sign.
func TestDualAxesMatchCovariance(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, w = 30, 160
	z := wideRows(r, n, w, 0.1)
	cov := gram(z, n, w)
	for e := range cov {
		cov[e] /= n
	}
	pv, pvec := symEigen(cov, w)
	dv, dvec := dualAxes(z, n, w)
	for k := range 5 {
		if math.Abs(pv[k]-dv[k]) > 1e-9*pv[0] {
			t.Errorf("variance %d: %g by the covariance, %g dual", k, pv[k], dv[k])
		}
		if c := math.Abs(dot(pvec[k*w:(k+1)*w], dvec[k*w:(k+1)*w])); math.Abs(c-1) > 1e-6 {
			t.Errorf("axis %d: |cos| = %g between the two", k, c)
		}
	}
}
