package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector kernels (AVX-512 then AVX2, or AVX2 alone) give the Go twin's
// bits on every length (tails included), across the whole range (x ≥ 0, the
// edge at −708, below it) with offsets, and the twin is expNeg itself.
func TestExpScaledBitIdentical(t *testing.T) {
	save := expVector512
	defer func() { expVector512 = save }()
	for _, v512 := range []bool{false, true} {
		if v512 && !save {
			t.Log("avx512: not in this build or CPU, not checked")
			continue
		}
		expVector512 = v512
		t.Run(map[bool]string{false: "avx2", true: "avx512"}[v512], testExpScaledBits)
	}
}

func testExpScaledBits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 3, 4, 5, 8, 9, 12, 13, 15, 31, 1000} {
		src := make([]float64, n)
		for i := range src {
			switch i % 5 {
			case 0:
				src[i] = r.Float64() * 3000 // far below −708 after scaling
			case 1:
				src[i] = 1416 + r.Float64()*0.01 // about the −708 edge
			case 2:
				src[i] = -r.Float64() // x > 0
			default:
				src[i] = r.Float64() * 100
			}
		}
		for _, so := range [][2]float64{{-0.5, 0}, {-0.5, 3}, {-1.7, 0.25}, {-0.5, -2}} {
			got, want := make([]float64, n), make([]float64, n)
			expScaled(got, src, so[0], so[1])
			expScaledGo(want, src, so[0], so[1])
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n=%d s=%v off=%v: [%d] (x=%v) = %v, Go twin %v", n, so[0], so[1], i, so[0]*(src[i]-so[1]), got[i], want[i])
				}
				if e := expNeg(so[0] * (src[i] - so[1])); want[i] != e {
					t.Fatalf("twin [%d] = %v, expNeg %v", i, want[i], e)
				}
			}
		}
	}
	x := []float64{-708, -707.99, -708.01, 0, 5, -1e-300}
	got := make([]float64, len(x))
	expScaled(got, x, 1, 0)
	for i, v := range x {
		if got[i] != expNeg(v) {
			t.Errorf("expScaled(%v) = %v, expNeg %v", v, got[i], expNeg(v))
		}
	}
	t.Logf("vector kernel: %v", expVector)
}

func BenchmarkExpScaled(b *testing.B) {
	src := make([]float64, 1024)
	for i := range src {
		src[i] = float64(i) * 0.05
	}
	dst := make([]float64, len(src))
	b.Run("go", func(b *testing.B) {
		for range b.N {
			expScaledGo(dst, src, -0.5, 0)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/exp")
	})
	save := expVector512
	defer func() { expVector512 = save }()
	for _, v512 := range []bool{false, true} {
		if v512 && !save {
			continue
		}
		b.Run(map[bool]string{false: "vector-avx2", true: "vector-avx512"}[v512], func(b *testing.B) {
			expVector512 = v512
			for range b.N {
				expScaled(dst, src, -0.5, 0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/exp")
		})
	}
	b.Run("math.Exp", func(b *testing.B) {
		for range b.N {
			for j, v := range src {
				dst[j] = math.Exp(-0.5 * v)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/exp")
	})
}
