package gpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// trendSeries is a time series with a linear trend, a seasonal wave and
// noise; the features are the time and, with covariate, a second column
// the target also depends on.
func trendSeries(t0, n int, covariate bool, rng *rand.Rand) ([][]float64, []float64) {
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		ti := float64(t0 + i)
		X[i] = []float64{ti}
		y[i] = 10 + 0.05*ti + math.Sin(2*math.Pi*ti/40) + 0.3*rng.NormFloat64()
		if covariate {
			x := rng.Float64()*4 - 2
			X[i] = append(X[i], x)
			y[i] += 2 * x
		}
	}
	return X, y
}

// olsPredict fits y on [1, X] by least squares (normal equations) and
// predicts Xq.
func olsPredict(X [][]float64, y []float64, Xq [][]float64) []float64 {
	p := len(X[0]) + 1
	row := func(x []float64) []float64 { return append([]float64{1}, x...) }
	a := make([]float64, p*p)
	b := make([]float64, p)
	for i, x := range X {
		r := row(x)
		for j := range p {
			b[j] += r[j] * y[i]
			for k := range p {
				a[j*p+k] += r[j] * r[k]
			}
		}
	}
	if err := cholesky(context.Background(), a, p); err != nil {
		panic(err)
	}
	beta := cholSolve(a, p, b)
	out := make([]float64, len(Xq))
	for q, x := range Xq {
		out[q] = dot(beta, row(x))
	}
	return out
}

func rmseOf(truth, pred []float64) float64 {
	var s float64
	for i := range truth {
		s += (truth[i] - pred[i]) * (truth[i] - pred[i])
	}
	return math.Sqrt(s / float64(len(truth)))
}

// levelShift is a series that steps from 0 to 5 at t = 300, plus noise:
// past its end the last value is right and a line through it is not.
func levelShift(t0, n int, rng *rand.Rand) ([][]float64, []float64) {
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		ti := float64(t0 + i)
		X[i] = []float64{ti}
		if ti >= 300 {
			y[i] = 5
		}
		y[i] += 0.3 * rng.NormFloat64()
	}
	return X, y
}

// curvingTrend is a series whose trend accelerates (a parabola in time,
// as co2_weekly's), with a seasonal wave and noise: past its end a line
// through the whole series and the last value both fall behind.
func curvingTrend(t0, n int, rng *rand.Rand) ([][]float64, []float64) {
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		ti := float64(t0 + i)
		X[i] = []float64{ti}
		y[i] = 1e-4*ti*ti + math.Sin(2*math.Pi*ti/40) + 0.3*rng.NormFloat64()
	}
	return X, y
}

// TestExtrapolationPastTheEnd: the queries up to 20% past the end of a
// series (the newest rows, lost in an outage) are predicted no worse than
// by the better of a least-squares line and the last observed value, and
// are flagged outside the context, while the context's own rows are not.
// Where the line is the very model that made the data, nothing beats it
// but by chance: the engine must come within 10% of it.
func TestExtrapolationPastTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		series func(t0, n int, rng *rand.Rand) ([][]float64, []float64)
	}{
		{"trend and season", func(t0, n int, rng *rand.Rand) ([][]float64, []float64) { return trendSeries(t0, n, false, rng) }},
		{"trend and a covariate", func(t0, n int, rng *rand.Rand) ([][]float64, []float64) { return trendSeries(t0, n, true, rng) }},
		{"level shift", levelShift},
		{"curving trend", curvingTrend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 400
			rng := rand.New(rand.NewPCG(7, 11))
			X, y := tc.series(0, n, rng)
			Xq, yq := tc.series(n, n/5, rng)
			r := mustFit(t, DefaultModel, X, y)
			p, err := r.PredictDetailed(t.Context(), Xq, PredictOptions{})
			if err != nil {
				t.Fatal(err)
			}
			last := make([]float64, len(yq))
			for q := range last {
				last[q] = y[n-1]
			}
			got := rmseOf(yq, p.Mean)
			line := rmseOf(yq, olsPredict(X, y, Xq))
			lastV := rmseOf(yq, last)
			t.Logf("RMSE over the 20%% past the end: engine %.3f, line %.3f, last value %.3f", got, line, lastV)
			if best := min(line, lastV); got > 1.1*best {
				t.Errorf("engine RMSE %.3f is worse than the better baseline's %.3f", got, best)
			}
			outside := 0
			for _, o := range p.Outside {
				if o {
					outside++
				}
			}
			// The first query or two past the end lie as close to the
			// context as its own rows lie to one another.
			if outside < len(p.Outside)-2 {
				t.Errorf("%d of %d queries past the end flagged outside the context", outside, len(p.Outside))
			}
			in, err := r.PredictDetailed(t.Context(), X[100:300], PredictOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for q, o := range in.Outside {
				if o {
					t.Errorf("context row %d flagged outside (distance %.2f)", 100+q, in.Distance[q])
				}
			}
		})
	}
}
