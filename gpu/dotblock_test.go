package gpu

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestDotBlockPaths checks every path of dotBlock this CPU has (AVX-512,
// AVX2 FMA, Go) on every length up to 70 and a long one: each of the
// sixteen sums within a few units of rounding of the exact sum (big.Float),
// scaled by Σ|a||b| (the sums' order differs between paths, so their bits
// do). On a CPU without a vector path only the Go loop is checked; the
// vector paths are skipped, saying which.
func TestDotBlockPaths(t *testing.T) {
	type path struct {
		name    string
		fma, av bool
		has     bool
	}
	paths := []path{
		{"go", false, false, true},
		{"avx2-fma", true, false, dotBlockHasFMA},
		{"avx512", true, true, dotBlockHasAVX512},
	}
	saveFMA, saveAVX := dotBlockHasFMA, dotBlockHasAVX512
	defer func() { dotBlockHasFMA, dotBlockHasAVX512 = saveFMA, saveAVX }()
	rng := rand.New(rand.NewPCG(16, 2))
	for _, p := range paths {
		if !p.has {
			t.Logf("%s: not in this build or CPU, skipped", p.name)
			continue
		}
		dotBlockHasFMA, dotBlockHasAVX512 = p.fma, p.av
		for _, k := range append(rangeInts(71), 333, 1024) {
			var a, b [4][]float64
			for r := range 4 {
				a[r], b[r] = make([]float64, k+r), make([]float64, k+3)
				for t := range a[r] {
					a[r][t] = rng.NormFloat64() * math.Exp2(float64(rng.IntN(20)-10))
				}
				for t := range b[r] {
					b[r][t] = rng.NormFloat64()
				}
			}
			var out [16]float64
			aa, bb := a, b
			dotBlock(&aa, &bb, k, &out)
			for r := range 4 {
				for c := range 4 {
					exact, mag := new(big.Float).SetPrec(2000), 0.0
					for t := range k {
						exact.Add(exact, new(big.Float).SetPrec(2000).Mul(big.NewFloat(a[r][t]), big.NewFloat(b[c][t])))
						mag += math.Abs(a[r][t] * b[c][t])
					}
					want, _ := exact.Float64()
					if d := math.Abs(out[4*r+c] - want); d > 4*float64(k+1)*0x1p-53*mag {
						t.Fatalf("%s k=%d [%d][%d]: got %g, exact %g (|Δ| %g, Σ|ab| %g)", p.name, k, r, c, out[4*r+c], want, d, mag)
					}
				}
			}
		}
	}
}

func rangeInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// BenchmarkDotBlock times the block kernel's paths on a Cholesky-sized row
// (GFLOP/s: 32 flops per k per call).
func BenchmarkDotBlock(b *testing.B) {
	saveFMA, saveAVX := dotBlockHasFMA, dotBlockHasAVX512
	defer func() { dotBlockHasFMA, dotBlockHasAVX512 = saveFMA, saveAVX }()
	const k = 384
	var a, c [4][]float64
	for r := range 4 {
		a[r], c[r] = make([]float64, k), make([]float64, k)
		for t := range k {
			a[r][t], c[r][t] = float64(t%7)-3, float64(t%5)-2
		}
	}
	for _, p := range []struct {
		name    string
		fma, av bool
		has     bool
	}{{"go", false, false, true}, {"avx2-fma", true, false, saveFMA}, {"avx512", true, true, saveAVX}} {
		if !p.has {
			continue
		}
		b.Run(p.name, func(b *testing.B) {
			dotBlockHasFMA, dotBlockHasAVX512 = p.fma, p.av
			var out [16]float64
			for range b.N {
				aa, cc := a, c
				dotBlock(&aa, &cc, k, &out)
			}
			b.ReportMetric(32*k*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// TestSqDistAccPaths checks every path of sqDistAcc and sqDistScaledAcc
// this CPU has against the Go loops, to the bit, on every length up to 40
// (every tail).
func TestSqDistAccPaths(t *testing.T) {
	save512, save2 := sqDistHasAVX512, sqDistHasAVX2
	defer func() { sqDistHasAVX512, sqDistHasAVX2 = save512, save2 }()
	rng := rand.New(rand.NewPCG(8, 1))
	for n := range 41 {
		src, base := make([]float64, n+3), make([]float64, n)
		for j := range src {
			src[j] = rng.NormFloat64() * 3
		}
		for j := range base {
			base[j] = rng.Float64()
		}
		c, w := rng.NormFloat64(), rng.Float64()*5
		sqDistHasAVX512, sqDistHasAVX2 = false, false
		want := append([]float64(nil), base...)
		sqDistAcc(want, src, c, w)
		wantS := append([]float64(nil), base...)
		sqDistScaledAcc(wantS, src, c, w)
		for j := range want {
			tt := src[j] - c
			if x := base[j] + tt*tt*w; math.Float64bits(x) != math.Float64bits(want[j]) {
				t.Fatalf("go n=%d [%d]: %v, want %v", n, j, want[j], x)
			}
			ts := (src[j] - c) * w
			if x := base[j] + ts*ts; math.Float64bits(x) != math.Float64bits(wantS[j]) {
				t.Fatalf("go scaled n=%d [%d]: %v, want %v", n, j, wantS[j], x)
			}
		}
		for _, p := range []struct {
			name      string
			av512, av bool
			has       bool
		}{{"avx2", false, true, save2}, {"avx512", true, true, save512}} {
			if !p.has {
				if n == 0 {
					t.Logf("%s: not in this build or CPU, skipped", p.name)
				}
				continue
			}
			sqDistHasAVX512, sqDistHasAVX2 = p.av512, p.av
			got := append([]float64(nil), base...)
			sqDistAcc(got, src, c, w)
			gotS := append([]float64(nil), base...)
			sqDistScaledAcc(gotS, src, c, w)
			for j := range got {
				if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
					t.Fatalf("%s n=%d [%d]: %v, Go %v", p.name, n, j, got[j], want[j])
				}
				if math.Float64bits(gotS[j]) != math.Float64bits(wantS[j]) {
					t.Fatalf("%s scaled n=%d [%d]: %v, Go %v", p.name, n, j, gotS[j], wantS[j])
				}
			}
		}
	}
}

// TestWsqSumPaths bounds wsqSum's paths (AVX-512 where the CPU has it, the
// Go loop always) against an exact sum on every length up to 40 and a long
// one, within a few units of rounding of Σ|c|(x−z)².
func TestWsqSumPaths(t *testing.T) {
	save := sqDistHasAVX512
	defer func() { sqDistHasAVX512 = save }()
	rng := rand.New(rand.NewPCG(9, 9))
	for _, v512 := range []bool{false, true} {
		if v512 && !save {
			t.Log("avx512: not in this build or CPU, skipped")
			continue
		}
		sqDistHasAVX512 = v512
		for _, n := range append(rangeInts(41), 333, 1000) {
			c, x := make([]float64, n), make([]float64, n+2)
			for j := range c {
				c[j] = rng.NormFloat64()
			}
			for j := range x {
				x[j] = rng.NormFloat64() * 2
			}
			z := rng.NormFloat64()
			exact, mag := new(big.Float).SetPrec(2000), 0.0
			for j := range n {
				tj := new(big.Float).SetPrec(2000).Sub(big.NewFloat(x[j]), big.NewFloat(z))
				tj.Mul(tj, tj)
				exact.Add(exact, tj.Mul(tj, big.NewFloat(c[j])))
				mag += math.Abs(c[j]) * (x[j] - z) * (x[j] - z)
			}
			want, _ := exact.Float64()
			if got := wsqSum(c, x, z); math.Abs(got-want) > 4*float64(n+2)*0x1p-53*mag {
				t.Fatalf("avx512=%v n=%d: %v, exact %v (Σ|c|(x−z)² %v)", v512, n, got, want, mag)
			}
		}
	}
}
