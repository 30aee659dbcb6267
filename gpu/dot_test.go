package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot4MatchesDot checks that each of dot4's products is dot's to the
// bit, on every length up to 70 (every tail) and on values that stress the
// order of the sums: wide magnitudes, cancellation, signed zeros, ±Inf.
func TestDot4MatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	special := []float64{0, math.Copysign(0, -1), 1e300, -1e300, 1e-300, math.Inf(1), math.Inf(-1), 1 + 0x1p-52}
	value := func(i int) float64 {
		switch {
		case i%17 == 0:
			return special[rng.IntN(len(special))]
		case i%5 == 0:
			return rng.NormFloat64() * math.Exp2(float64(rng.IntN(80)-40))
		}
		return rng.NormFloat64()
	}
	same := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
	}
	for trial := range 200 {
		n := trial % 71
		vec := func(extra int) []float64 {
			v := make([]float64, n+extra)
			for i := range v {
				v[i] = value(i + trial)
			}
			return v
		}
		a := vec(0)
		b := [4][]float64{vec(0), vec(1), vec(3), vec(0)} // longer b's are cut to len(a)
		var got [4]float64
		got[0], got[1], got[2], got[3] = dot4(a, b[0], b[1], b[2], b[3])
		for k := range b {
			if want := dot(a, b[k]); !same(got[k], want) {
				t.Fatalf("n=%d product %d: dot4 %x, dot %x (vector loop %v)", n, k, math.Float64bits(got[k]), math.Float64bits(want), dot4Vector)
			}
		}
	}
}

// BenchmarkDot4 compares dot4 with four calls of dot on the Cholesky
// update's panel width (48) and on a long row.
func BenchmarkDot4(b *testing.B) {
	for _, n := range []int{48, 1024} {
		a := make([]float64, n)
		bs := make([][]float64, 4)
		for i := range a {
			a[i] = float64(i%7) - 3
		}
		for k := range bs {
			bs[k] = append([]float64(nil), a...)
		}
		b.Run(fmt.Sprintf("dot4/n=%d", n), func(b *testing.B) {
			var s float64
			for range b.N {
				d0, d1, d2, d3 := dot4(a, bs[0], bs[1], bs[2], bs[3])
				s += d0 + d1 + d2 + d3
			}
			dotSink = s
		})
		a1 := append([]float64(nil), a...)
		b.Run(fmt.Sprintf("dot2x4/n=%d", n), func(b *testing.B) {
			var s float64
			for range b.N {
				d := dot2x4(a, a1, bs[0], bs[1], bs[2], bs[3])
				s += d[0][0] + d[1][3]
			}
			dotSink = s
		})
		b.Run(fmt.Sprintf("dot4×2/n=%d", n), func(b *testing.B) {
			var s float64
			for range b.N {
				d0, _, _, _ := dot4(a, bs[0], bs[1], bs[2], bs[3])
				_, _, _, e3 := dot4(a1, bs[0], bs[1], bs[2], bs[3])
				s += d0 + e3
			}
			dotSink = s
		})
		b.Run(fmt.Sprintf("dot×4/n=%d", n), func(b *testing.B) {
			var s float64
			for range b.N {
				s += dot(a, bs[0]) + dot(a, bs[1]) + dot(a, bs[2]) + dot(a, bs[3])
			}
			dotSink = s
		})
	}
}

var dotSink float64

// TestDot2x4MatchesDot: each of dot2x4's eight products is dot's to the
// bit, on every length up to 70 and the same stressing values.
func TestDot2x4MatchesDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	special := []float64{0, math.Copysign(0, -1), 1e300, -1e300, 1e-300, math.Inf(1), 1 + 0x1p-52}
	same := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
	}
	for trial := range 200 {
		n := trial % 71
		vec := func(extra int) []float64 {
			v := make([]float64, n+extra)
			for i := range v {
				switch {
				case (i+trial)%19 == 0:
					v[i] = special[rng.IntN(len(special))]
				case i%5 == 0:
					v[i] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(80)-40))
				default:
					v[i] = rng.NormFloat64()
				}
			}
			return v
		}
		a := [2][]float64{vec(0), vec(2)}
		b := [4][]float64{vec(0), vec(1), vec(3), vec(0)}
		got := dot2x4(a[0], a[1], b[0], b[1], b[2], b[3])
		for r := range a {
			for k := range b {
				if want := dot(a[r][:n], b[k][:n]); !same(got[r][k], want) {
					t.Fatalf("n=%d row %d product %d: dot2x4 %x, dot %x", n, r, k, math.Float64bits(got[r][k]), math.Float64bits(want))
				}
			}
		}
	}
}
