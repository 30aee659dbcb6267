package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// multiplicative is a positive series whose level is a product of a
// covariate's effect and log-normal noise, as a pollutant's concentration:
// its variance grows with its level and its targets have a long right
// tail.
func multiplicative(n int, rng *rand.Rand) ([][]float64, []float64) {
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		x := rng.Float64()*4 - 2
		X[i] = []float64{x, rng.Float64()}
		y[i] = math.Exp(1 + 0.9*x + 0.35*rng.NormFloat64())
	}
	return X, y
}

// TestTargetLogHelps: on the multiplicative series the target is fitted on
// the log scale and the mean predictions beat the same engine fitted on
// the raw scale in squared error on new rows; the quantiles stay ordered
// and positive, and the median lies below the mean (a log-normal's).
func TestTargetLogHelps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	X, y := multiplicative(300, rng)
	Xq, yq := multiplicative(300, rng)
	if tl := fitTargetLog(y); !tl.on {
		t.Fatalf("skewness %.2f: want the log scale", skewness(y, 0, false))
	}
	r := mustFit(t, DefaultModel, X, y)
	p, err := r.PredictDetailed(t.Context(), Xq, PredictOptions{Quantiles: []float64{0.1, 0.5, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	logged := rmseOf(yq, p.Mean)
	saved := minLogSkew
	minLogSkew = math.Inf(1)
	raw := rmseOf(yq, mustPredict(t, mustFit(t, DefaultModel, X, y), Xq))
	minLogSkew = saved
	t.Logf("RMSE on new rows: log scale %.4f, raw scale %.4f", logged, raw)
	if logged >= raw {
		t.Errorf("log scale RMSE %.4f, want below the raw scale's %.4f", logged, raw)
	}
	below := 0
	for q, row := range p.Quantiles {
		if !(row[0] > 0 && row[0] <= row[1] && row[1] <= row[2]) {
			t.Fatalf("query %d: quantiles %v, want positive and ordered", q, row)
		}
		if p.Median[q] < p.Mean[q] {
			below++
		}
	}
	if below != len(p.Mean) {
		t.Errorf("median below the mean on %d of %d queries, want all", below, len(p.Mean))
	}
}

// TestTargetLogNotApplied: a symmetric target, a skewed one that reaches 0
// or below, and one too few rows to judge are fitted on their own scale,
// to the bit as before.
func TestTargetLogNotApplied(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	X, y := multiplicative(200, rng)
	sym := make([]float64, len(y))
	neg := make([]float64, len(y))
	for i, v := range y {
		sym[i] = math.Log(v) + 5
		neg[i] = v - 1
	}
	for name, yy := range map[string][]float64{"symmetric": sym, "reaches below 0": neg, "few rows": y[:19]} {
		if tl := fitTargetLog(yy); tl.on {
			t.Errorf("%s: log scale chosen (skewness %.2f)", name, skewness(yy, 0, false))
		}
	}
	r := mustFit(t, DefaultModel, X, sym)
	if r.fit.pp.tgt.on {
		t.Fatal("symmetric target fitted on the log scale")
	}
	if z := r.fit.z[:r.fit.f]; r.fit.logVar(z, nil) != 0 || r.fit.output(0.5, z, nil) != 0.5*r.fit.pp.yScale+r.fit.pp.yMean {
		t.Error("an untransformed target's outputs are not the plain map back")
	}
}

// TestTargetLogShift: log(y) of a target with values near 0 is
// left-skewed; the shift is the least that makes it not so.
func TestTargetLogShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 8))
	y := make([]float64, 500)
	for i := range y {
		y[i] = 1 + math.Exp(3+0.8*rng.NormFloat64()) // log(y) is squeezed near 0 by the 1
	}
	y[0] = 0.01
	tl := fitTargetLog(y)
	if !tl.on || !(tl.shift > 0) {
		t.Fatalf("transform %+v, want the log scale with a shift", tl)
	}
	if s := skewness(y, tl.shift, true); math.Abs(s) > 1e-6 {
		t.Errorf("skewness of log(y + %.3g) = %g, want 0", tl.shift, s)
	}
}
