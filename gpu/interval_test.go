package gpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// hetero is y = sin(2x) + σ(x)·ε on x ∈ [−2, 2] with the noise growing
// tenfold across the range (σ = 0.05 … 0.5), and a second, irrelevant
// feature.
func hetero(n int, rng *rand.Rand) ([][]float64, []float64, []float64) {
	X := make([][]float64, n)
	y := make([]float64, n)
	sd := make([]float64, n)
	for i := range X {
		x := rng.Float64()*4 - 2
		X[i] = []float64{x, rng.Float64()}
		sd[i] = 0.05 + 0.45*(x+2)/4
		y[i] = math.Sin(2*x) + sd[i]*rng.NormFloat64()
	}
	return X, y, sd
}

// TestIntervalCoverageHeteroscedastic: the central 80% interval covers
// about 80% of fresh rows overall, and about 80% in the quiet third and in
// the noisy third alike: the band follows the local noise (a band of one
// width for all would cover nearly all quiet rows and too few noisy ones).
func TestIntervalCoverageHeteroscedastic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	X, y, _ := hetero(800, rng)
	Xq, yq, sd := hetero(3000, rng)
	r := mustFit(t, DefaultModel, X, y)
	p, err := r.PredictDetailed(t.Context(), Xq, PredictOptions{Quantiles: []float64{0.1, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	var in, n [3]int
	var width [3]float64
	for q, row := range p.Quantiles {
		third := min(int((Xq[q][0]+2)/4*3), 2)
		n[third]++
		width[third] += row[1] - row[0]
		if yq[q] >= row[0] && yq[q] <= row[1] {
			in[third]++
		}
	}
	all := float64(in[0]+in[1]+in[2]) / float64(len(yq))
	t.Logf("coverage %.3f; by third %.3f %.3f %.3f; mean width by third %.3f %.3f %.3f (noise sd %.2f…%.2f)", all,
		float64(in[0])/float64(n[0]), float64(in[1])/float64(n[1]), float64(in[2])/float64(n[2]),
		width[0]/float64(n[0]), width[1]/float64(n[1]), width[2]/float64(n[2]), slices.Min(sd), slices.Max(sd))
	if math.Abs(all-0.8) > 0.04 {
		t.Errorf("coverage %.3f, want 0.80 ± 0.04", all)
	}
	for _, k := range []int{0, 2} {
		if c := float64(in[k]) / float64(n[k]); math.Abs(c-0.8) > 0.08 {
			t.Errorf("coverage in third %d = %.3f, want 0.80 ± 0.08", k, c)
		}
	}
	// The noise's sd averages 0.125 in the quiet third, 0.425 in the noisy.
	if width[2]/float64(n[2]) < 2.5*width[0]/float64(n[0]) {
		t.Errorf("the noisy third's band (%.3f) is not at least 2.5× the quiet third's (%.3f)", width[2]/float64(n[2]), width[0]/float64(n[0]))
	}
}

// TestQuantilesMonotoneInCallersOrder: quantiles come in the caller's order
// (repeats kept) and never decrease with the level, for queries inside,
// between and far outside the context; the median lies between the 0.4 and
// 0.6 quantiles, and the mean is Predict's.
func TestQuantilesMonotoneInCallersOrder(t *testing.T) {
	X, y := synth(300, 4, 5)
	r := mustFit(t, DefaultModel, X, y)
	Xq, _ := synth(50, 4, 6)
	for _, far := range []float64{3, 30, -1e3} {
		Xq = append(Xq, []float64{far, far, far, far})
	}
	taus := []float64{0.9, 0.1, 0.5, 0.99, 0.01, 0.25, 0.5, 0.6, 0.4, 0.75}
	p, err := r.PredictDetailed(t.Context(), Xq, PredictOptions{Quantiles: taus})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Taus, taus) {
		t.Fatalf("taus %v, want the caller's %v", p.Taus, taus)
	}
	want := mustPredict(t, r, Xq)
	order := make([]int, len(taus))
	for k := range order {
		order[k] = k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if taus[a] < taus[b] {
			return -1
		} else if taus[a] > taus[b] {
			return 1
		}
		return 0
	})
	for q, row := range p.Quantiles {
		if len(row) != len(taus) {
			t.Fatalf("query %d: %d quantiles, want %d", q, len(row), len(taus))
		}
		for k := 1; k < len(order); k++ {
			if lo, hi := row[order[k-1]], row[order[k]]; !(lo <= hi) {
				t.Errorf("query %d: quantile at %v = %v above the one at %v = %v", q, taus[order[k-1]], lo, taus[order[k]], hi)
			}
		}
		if row[2] != row[6] || row[2] != p.Median[q] {
			t.Errorf("query %d: the two 0.5 levels and the median differ: %v %v %v", q, row[2], row[6], p.Median[q])
		}
		if p.Mean[q] != want[q] {
			t.Errorf("query %d: mean %v, Predict %v", q, p.Mean[q], want[q])
		}
	}
	n := len(Xq)
	for q := n - 3; q < n; q++ {
		if !p.Outside[q] {
			t.Errorf("query %v not flagged outside", Xq[q])
		}
	}
	// The band widens away from the context.
	wIn := p.Quantiles[0][0] - p.Quantiles[0][1]
	wFar := p.Quantiles[n-1][0] - p.Quantiles[n-1][1]
	if !(wFar > wIn) {
		t.Errorf("80%% band far outside %.3f not wider than inside %.3f", wFar, wIn)
	}
}

func TestValidateQuantiles(t *testing.T) {
	if err := ValidateQuantiles(QuantileBank()); err != nil {
		t.Fatalf("the bank: %v", err)
	}
	if got := QuantileBank(); len(got) != 99 || got[0] != 0.01 || got[49] != 0.5 || got[98] != 0.99 {
		t.Errorf("bank %v", got)
	}
	for _, tc := range []struct {
		levels []float64
		want   string
	}{
		{[]float64{0.1, 0, 1, 0.5, -2}, "0, 1, -2 not in (0, 1)"},
		{[]float64{math.NaN(), math.Inf(1)}, "NaN, +Inf not in (0, 1)"},
		{make([]float64, 100), "100 levels, at most 99"},
	} {
		err := ValidateQuantiles(tc.levels)
		if !errors.Is(err, ErrBadQuantiles) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidateQuantiles(%v) = %v, want %q", tc.levels, err, tc.want)
		}
	}
	r := mustFit(t, DefaultModel, [][]float64{{1}, {2}, {3}, {4}}, []float64{1, 2, 3, 5})
	if _, err := r.PredictDetailed(t.Context(), [][]float64{{1}}, PredictOptions{Quantiles: []float64{1.5}}); !errors.Is(err, ErrBadQuantiles) {
		t.Errorf("PredictDetailed with level 1.5: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.PredictDetailed(ctx, [][]float64{{1}}, PredictOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("PredictDetailed on a cancelled context: %v", err)
	}
}

// TestQuantilesConstantModel: a context the engine cannot learn from (two
// rows) predicts its mean, and its distribution is the targets' own.
func TestQuantilesConstantModel(t *testing.T) {
	r := mustFit(t, DefaultModel, [][]float64{{1}, {2}}, []float64{10, 20})
	p, err := r.PredictDetailed(t.Context(), [][]float64{{5}}, PredictOptions{Quantiles: []float64{0.01, 0.5, 0.99}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Quantiles[0]; p.Mean[0] != 15 || got[0] != 10 || got[1] != 15 || got[2] != 20 {
		t.Errorf("mean %v quantiles %v, want 15 and [10 15 20]", p.Mean[0], got)
	}
	same := mustFit(t, DefaultModel, [][]float64{{1}, {2}, {3}}, []float64{7, 7, 7})
	p, err = same.PredictDetailed(t.Context(), [][]float64{{5}}, PredictOptions{Quantiles: []float64{0.1, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Quantiles[0]; got[0] != 7 || got[1] != 7 {
		t.Errorf("constant target: quantiles %v, want [7 7]", got)
	}
}

// An exact fit (noise-free rows, repeated points) gives finite medians and
// quantiles: the residuals' mean square fell to the smallest float, the
// local scale to 0 and every normalised residual to 0/0 (null on the wire).
func TestQuantilesOfAnExactFit(t *testing.T) {
	for _, tc := range []struct {
		name string
		X    [][]float64
		y    []float64
	}{
		{"two points twice", [][]float64{{1}, {1}, {2}, {2}}, []float64{5, 5, 7, 7}},
		{"a line on two levels", rows(300, func(i int) []float64 { return []float64{float64(i % 2)} }), ys(300, func(i int) float64 { return 10 * float64(i%2) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRegressor("regressd/model-2l")
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Fit(t.Context(), tc.X, tc.y); err != nil {
				t.Fatal(err)
			}
			p, err := r.PredictDetailed(t.Context(), [][]float64{tc.X[0], {1.5}}, PredictOptions{Quantiles: []float64{0.1, 0.5, 0.9}})
			if err != nil {
				t.Fatal(err)
			}
			for q := range p.Mean {
				for k, v := range append([]float64{p.Median[q]}, p.Quantiles[q]...) {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("query %d: value %d is %v (median %v, quantiles %v)", q, k, v, p.Median, p.Quantiles)
					}
				}
			}
		})
	}
}

func rows(n int, f func(int) []float64) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func ys(n int, f func(int) float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// A noise-free context on a few repeated levels (a quantized sensor) is
// predicted exactly by every model: the tiny length scale it fits put two
// levels on one side of a block's anchor past the key clamp, one key for
// both, and model-4l's smooth heads averaged them toward the mean.
func TestRepeatedLevelsExact(t *testing.T) {
	X := rows(300, func(i int) []float64 { return []float64{float64(i % 5)} })
	y := ys(300, func(i int) float64 { return 10 * float64(i%5) })
	for _, m := range []string{"regressd/model-2l", "regressd/model-4l"} {
		r, err := NewRegressor(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Fit(t.Context(), X, y); err != nil {
			t.Fatal(err)
		}
		got, err := r.Predict(t.Context(), [][]float64{{0}, {1}, {2}, {3}, {4}})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range got {
			if math.Abs(v-10*float64(k)) > 1e-6 {
				t.Fatalf("%s: predictions %v, want 0 10 20 30 40", m, got)
			}
		}
	}
}
