package gpu

import (
	"math"
	"testing"
)

// TestTrendBoundedOutsideBox: a quadratic trend continues along its tangent
// past the context's range instead of following its parabola.
func TestTrendBoundedOutsideBox(t *testing.T) {
	const n = 200
	z := make([]float64, n)
	y := make([]float64, n)
	for i := range z {
		z[i] = -1 + 2*float64(i)/(n-1)
		y[i] = z[i] + 2*z[i]*z[i] - 2.0/3 // about mean 0, as the engine's standardised target
	}
	tr, _, _ := fitTrend(z, n, 1, y)
	if tr.degree != 2 {
		t.Fatalf("degree %d, want 2 on a parabola", tr.degree)
	}
	at1 := tr.eval([]float64{1}, nil)
	slope := (tr.eval([]float64{1}, nil) - tr.eval([]float64{1 - 1e-6}, nil)) / 1e-6
	for _, x := range []float64{1.5, 3, 10} {
		want := at1 + slope*(x-1)
		if got := tr.eval([]float64{x}, nil); math.Abs(got-want) > 1e-4*math.Abs(want) {
			t.Errorf("trend at %v = %v, want the tangent's %v", x, got, want)
		}
	}
	if got, want := tr.eval([]float64{0.5}, nil), 0.5+2*0.25-2.0/3; math.Abs(got-want) > 0.01 {
		t.Errorf("trend inside the range at 0.5 = %v, want about %v", got, want)
	}
}

// TestTrendVariants: past the range the far readouts' other continuations
// of a quadratic trend are its parabola and its value at the range's edge;
// inside the range they are the trend itself.
func TestTrendVariants(t *testing.T) {
	const n = 200
	z := make([]float64, n)
	y := make([]float64, n)
	for i := range z {
		z[i] = -1 + 2*float64(i)/(n-1)
		y[i] = z[i] + 2*z[i]*z[i] - 2.0/3
	}
	tr, _, _ := fitTrend(z, n, 1, y)
	lo, hi := []float64{-1}, []float64{1}
	raw, flat := trendVariants(tr, []float64{3}, lo, hi)
	if want := 3 + 2*9 - 2.0/3; math.Abs(raw-want) > 0.05*want {
		t.Errorf("raw continuation at 3 = %v, want the parabola's %v", raw, want)
	}
	if want := tr.eval([]float64{1}, nil); flat != want {
		t.Errorf("flat continuation at 3 = %v, want the trend at the edge %v", flat, want)
	}
	tangent := tr.eval([]float64{3}, nil)
	if !(flat < tangent && tangent < raw) {
		t.Errorf("at 3: flat %v, tangent %v, raw %v: want flat < tangent < raw on an upturned parabola", flat, tangent, raw)
	}
	raw, flat = trendVariants(tr, []float64{0.5}, lo, hi)
	if in := tr.eval([]float64{0.5}, nil); math.Abs(raw-in) > 1e-12 || flat != in {
		t.Errorf("inside the range: raw %v, flat %v, trend %v; want all equal", raw, flat, in)
	}
}
