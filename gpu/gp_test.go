package gpu

import (
	"context"
	"math"
	"testing"
)

// TestGPValueGradient checks gpValue's gradient against central finite
// differences of its value, for every hyperparameter.
func TestGPValueGradient(t *testing.T) {
	X, y := synth(60, 3, 5)
	m, f := len(X), 3
	z := make([]float64, m*f)
	for i, r := range X {
		for d, v := range r {
			if math.IsNaN(v) {
				v = 0
			}
			z[i*f+d] = v
		}
	}
	theta := []float64{math.Log(0.8), math.Log(1.5), math.Log(2), math.Log(0.7), math.Log(0.05)}
	ctx := context.Background()
	_, grad, ok := gpValue(ctx, z, m, f, y, theta)
	if !ok {
		t.Fatal("gpValue failed on a well-conditioned kernel")
	}
	g, ok := grad()
	if !ok {
		t.Fatal("gradient failed")
	}
	const h = 1e-5
	for p := range theta {
		tp := append([]float64(nil), theta...)
		tm := append([]float64(nil), theta...)
		tp[p] += h
		tm[p] -= h
		vp, _, _ := gpValue(ctx, z, m, f, y, tp)
		vm, _, _ := gpValue(ctx, z, m, f, y, tm)
		fd := (vp - vm) / (2 * h)
		if got, want := g[p], fd; math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("gradient[%d] = %.8g, finite difference %.8g", p, got, want)
		}
	}
}
