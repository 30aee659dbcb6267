package gpu

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	var worst float64
	for i := 0; i <= 2_000_000; i++ {
		x := -745 * float64(i) / 2_000_000
		got, want := expNeg(x), math.Exp(x)
		if want < 0x1p-1000 {
			if math.Abs(got-want) > 1e-300 {
				t.Fatalf("expNeg(%g) = %g, want %g", x, got, want)
			}
			continue
		}
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 1e-9 {
		t.Errorf("worst relative error %g", worst)
	}
	if expNeg(0) != 1 || expNeg(3) != 1 || expNeg(-1000) != 0 {
		t.Error("edges")
	}
}

func BenchmarkExp(b *testing.B) {
	var s float64
	b.Run("math.Exp", func(b *testing.B) {
		for i := range b.N {
			s += math.Exp(-float64(i&1023) * 0.01)
		}
	})
	b.Run("expNeg", func(b *testing.B) {
		for i := range b.N {
			s += expNeg(-float64(i&1023) * 0.01)
		}
	})
	_ = s
}
