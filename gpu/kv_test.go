package gpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// keysAt, with x − a taken once for all heads, writes keysAtGo's bits,
// for odd and even feature counts (the padding coordinate) and queries far
// enough to clamp.
func TestKeysAtBitIdentical(t *testing.T) {
	for _, f := range []int{1, 4, 5} {
		rng := rand.New(rand.NewPCG(uint64(f), 9))
		X := make([][]float64, 150)
		y := make([]float64, len(X))
		for i := range X {
			X[i] = make([]float64, f)
			for d := range X[i] {
				X[i][d] = rng.NormFloat64()
			}
			y[i] = X[i][0] + 0.1*rng.NormFloat64()
		}
		r, err := NewRegressor("regressd/model-2l")
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Fit(context.Background(), X, y); err != nil {
			t.Fatal(err)
		}
		c := r.fit
		if c.constant {
			t.Fatalf("f=%d: constant fit", f)
		}
		qw := c.g * quadWidth
		nb := len(c.anchors) / c.f
		for q := range 20 {
			x := make([]float64, c.f)
			for d := range x {
				x[d] = rng.NormFloat64() * float64(1+q*q) // the last ones clamp
			}
			for l := range c.layers {
				got := make([]float32, quads*nb*qw)
				want := make([]float32, len(got))
				for i := range got {
					got[i], want[i] = 7, 7 // both must write every coordinate
				}
				for b := range nb {
					c.keysAt(l, x, c.anchors[b*c.f:(b+1)*c.f], got[b*qw:], nb*qw)
					c.keysAtGo(l, x, c.anchors[b*c.f:(b+1)*c.f], want[b*qw:], nb*qw)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("f=%d query %d layer %d: key [%d] = %v, coordinate by coordinate %v", f, q, l, i, got[i], want[i])
					}
				}
			}
		}
	}
}
