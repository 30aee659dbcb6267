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
