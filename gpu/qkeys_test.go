package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQueryKeysAVX2BitIdentical holds the AVX2 query keys (queryKeysAVX2)
// to keysAtGo's bits, coordinate by coordinate, over feature counts that
// leave an odd pair and one to 33 features, with coordinates that clamp,
// tiny and huge scales and a NaN feature.
func TestQueryKeysAVX2BitIdentical(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 13))
	for _, f := range []int{1, 2, 3, 5, 8, 9, 16, 17, 33} {
		g := (f + 1) / 2
		const nb = 5
		c := &contextFit{f: f, g: g, anchors: make([]float64, nb*f), layers: make([][headsPerLayer]head, 2)}
		for i := range c.anchors {
			c.anchors[i] = r.NormFloat64()
		}
		for l := range c.layers {
			for h := range headsPerLayer {
				inv := make([]float64, f)
				for d := range inv {
					inv[d] = math.Exp(r.NormFloat64() * 3)
				}
				c.layers[l][h].inv = inv
			}
		}
		qw := g * quadWidth
		for q := range 12 {
			x := make([]float64, f)
			for d := range x {
				x[d] = r.NormFloat64() * float64(1+q*q)
			}
			if q == 11 {
				x[f-1] = math.NaN()
			}
			for l := range c.layers {
				got, want := make([]float32, quads*nb*qw), make([]float32, quads*nb*qw)
				for i := range got {
					got[i], want[i] = 7, 7 // both must write every coordinate
				}
				if !c.queryKeysAVX2(l, x, got) {
					t.Skipf("no AVX2 query keys here (AVX2 %v, score kernel %s)", qkeysHasAVX2, archKernel.name)
				}
				for b := range nb {
					c.keysAtGo(l, x, c.anchors[b*f:(b+1)*f], want[b*qw:], nb*qw)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("f=%d query %d layer %d entry %d: %v, want %v", f, q, l, i, got[i], want[i])
					}
				}
			}
		}
	}
}
