package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// BenchmarkLinalg times the GP objective's cubic steps (Cholesky, L⁻¹,
// K⁻¹) and the whole objective with its gradient on the hyperparameter
// search's sizes (384 and 800 rows) and a GP expert's (2,048), in CPU
// milliseconds per call: on a shared machine steadier than wall time.
func BenchmarkLinalg(b *testing.B) {
	for _, n := range []int{384, 800, 2048} {
		a := spd(n, 1)
		l := append([]float64(nil), a...)
		if err := cholesky(context.Background(), l, n); err != nil {
			b.Fatal(err)
		}
		xt := invLowerT(context.Background(), l, n)
		steps := []struct {
			name string
			fn   func()
		}{
			{"cholesky", func() {
				c := append([]float64(nil), a...)
				if err := cholesky(context.Background(), c, n); err != nil {
					b.Fatal(err)
				}
			}},
			{"invLowerT", func() { invLowerT(context.Background(), l, n) }},
			{"invFull", func() { invFull(context.Background(), xt, n) }},
		}
		for _, s := range steps {
			b.Run(fmt.Sprintf("%s/n=%d", s.name, n), func(b *testing.B) {
				c0 := cpuSeconds()
				for range b.N {
					s.fn()
				}
				b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
			})
		}
	}
	for _, m := range []int{384, 800} {
		X, y := synth(m, 8, 3)
		z := make([]float64, m*8)
		for i, r := range X {
			for d, v := range r {
				if !math.IsNaN(v) {
					z[i*8+d] = v
				}
			}
		}
		theta := []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, -2}
		b.Run(fmt.Sprintf("gpValueGrad/m=%d", m), func(b *testing.B) {
			c0 := cpuSeconds()
			for range b.N {
				_, grad, ok := gpValue(context.Background(), z, m, 8, y, theta, nil)
				if !ok {
					b.Fatal("gpValue failed")
				}
				if _, ok := grad(); !ok {
					b.Fatal("gradient failed")
				}
			}
			b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}
