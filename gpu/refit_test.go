package gpu

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestFitLikeOwnContextIsFit: fitted like itself on its own rows, a
// regressor recomputes every row-dependent part as Fit did, so its
// predictions and quantiles are Fit's to the bit.
func TestFitLikeOwnContextIsFit(t *testing.T) {
	X, y := synth(700, 4, 1)
	Xq, _ := synth(200, 4, 2)
	base := mustFit(t, "regressd/model-2l", X, y)
	defer base.Close()
	opt := PredictOptions{Quantiles: []float64{0.1, 0.5, 0.9}}
	want, err := base.PredictDetailed(context.Background(), Xq, opt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegressor("regressd/model-2l")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.FitLike(context.Background(), base, X, y); err != nil {
		t.Fatal(err)
	}
	got, err := r.PredictDetailed(context.Background(), Xq, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Mean, want.Mean) {
		t.Error("fitted like itself on its own context, the predictions differ from Fit's")
	}
	for q := range Xq {
		if !slices.Equal(got.Quantiles[q], want.Quantiles[q]) {
			t.Fatalf("query %d: quantiles %v, Fit's %v", q, got.Quantiles[q], want.Quantiles[q])
		}
	}
}

// TestFitLikeOtherRows: on other rows of the same table a regressor
// fitted like a base predicts about as well as one fitted in full, and its
// intervals still cover.
func TestFitLikeOtherRows(t *testing.T) {
	Xb, yb := synth(800, 4, 1)
	X, y := synth(800, 4, 3)
	Xq, yq := synth(1000, 4, 2)
	base := mustFit(t, "regressd/model-2l", Xb, yb)
	defer base.Close()
	full := mustFit(t, "regressd/model-2l", X, y)
	defer full.Close()
	r, err := NewRegressor("regressd/model-2l")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.FitLike(context.Background(), base, X, y); err != nil {
		t.Fatal(err)
	}
	pf, err := full.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := r.PredictDetailed(context.Background(), Xq, PredictOptions{Quantiles: []float64{0.05, 0.95}})
	if err != nil {
		t.Fatal(err)
	}
	rf, rl := r2(yq, pf), r2(yq, pr.Mean)
	t.Logf("R² full fit %.4f, fitted like the base %.4f", rf, rl)
	if rl < rf-0.01 {
		t.Errorf("R² fitted like the base %.4f, full fit %.4f", rl, rf)
	}
	in := 0
	for q, v := range yq {
		if pr.Quantiles[q][0] <= v && v <= pr.Quantiles[q][1] {
			in++
		}
	}
	c := float64(in) / float64(len(yq))
	t.Logf("the 90%% interval covers %.3f of the queries", c)
	if c < 0.8 || c > 0.98 {
		t.Errorf("the 90%% interval covers %.3f of the queries", c)
	}
}

func TestFitLikeRefusals(t *testing.T) {
	X, y := synth(100, 3, 1)
	r, err := NewRegressor("regressd/model-2l")
	if err != nil {
		t.Fatal(err)
	}
	unfitted, err := NewRegressor("regressd/model-2l")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.FitLike(context.Background(), unfitted, X, y); err == nil || !strings.Contains(err.Error(), "not fitted") {
		t.Errorf("unfitted base: %v", err)
	}
	other := mustFit(t, "regressd/model-4l", X, y)
	if err := r.FitLike(context.Background(), other, X, y); err == nil || !strings.Contains(err.Error(), "model") {
		t.Errorf("another model's base: %v", err)
	}
	base := mustFit(t, "regressd/model-2l", X, y)
	if err := r.FitLike(context.Background(), base, X[:5], y[:4]); err == nil {
		t.Error("5 rows and 4 targets accepted")
	}
	X2, y2 := synth(10, 2, 1)
	if err := r.FitLike(context.Background(), base, X2, y2); err == nil {
		t.Error("rows of 2 features accepted by a base of 3")
	}
}
