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
	_, grad, ok := gpValue(ctx, z, m, f, y, theta, nil)
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
		vp, _, _ := gpValue(ctx, z, m, f, y, tp, nil)
		vm, _, _ := gpValue(ctx, z, m, f, y, tm, nil)
		fd := (vp - vm) / (2 * h)
		if got, want := g[p], fd; math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("gradient[%d] = %.8g, finite difference %.8g", p, got, want)
		}
	}
}

// gpValue with one workspace for every call gives the value and gradient of
// fresh buffers, to the bit, whatever the call before it left there.
func TestGPValueReusedWork(t *testing.T) {
	X, y := synth(70, 3, 6)
	m, f := len(X), 3
	z := make([]float64, m*f)
	for i, r := range X {
		for d, v := range r {
			if !math.IsNaN(v) {
				z[i*f+d] = v
			}
		}
	}
	ctx := context.Background()
	w := &gpWork{}
	for k, theta := range [][]float64{
		{0, 0, 0, 0, math.Log(0.1)},
		{math.Log(0.3), math.Log(2), math.Log(5), math.Log(3), math.Log(0.01)},
		{math.Log(0.8), math.Log(1.5), math.Log(2), math.Log(0.7), math.Log(0.05)},
	} {
		v0, g0, ok0 := gpValue(ctx, z, m, f, y, theta, nil)
		v1, g1, ok1 := gpValue(ctx, z, m, f, y, theta, w)
		if !ok0 || !ok1 || math.Float64bits(v0) != math.Float64bits(v1) {
			t.Fatalf("theta %d: value %v (%v) fresh, %v (%v) reused", k, v0, ok0, v1, ok1)
		}
		a, _ := g0()
		b, _ := g1()
		for p := range a {
			if math.Float64bits(a[p]) != math.Float64bits(b[p]) {
				t.Fatalf("theta %d: gradient %d = %v fresh, %v reused", k, p, a[p], b[p])
			}
		}
	}
}
