package gpu

import (
	"context"
	"testing"
)

// BenchmarkLooColumns times the GP experts' leave-one-out columns for a
// fifth of the rows (looColumns, the scored rows of a 10k-row context)
// beside all of L⁻¹ (invLowerT) on a 2,048-row expert, in CPU milliseconds
// per call.
func BenchmarkLooColumns(b *testing.B) {
	const n = 2048
	l := spd(n, 2)
	if err := cholesky(context.Background(), l, n); err != nil {
		b.Fatal(err)
	}
	var cols []int
	for j := 0; j < n; j += 5 {
		cols = append(cols, j)
	}
	b.Run("looColumns-fifth", func(b *testing.B) {
		c0 := cpuSeconds()
		for range b.N {
			looColumns(context.Background(), l, n, cols, func(int, []float64) {})
		}
		b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
	})
	b.Run("invLowerT-all", func(b *testing.B) {
		c0 := cpuSeconds()
		for range b.N {
			invLowerT(context.Background(), l, n)
		}
		b.ReportMetric((cpuSeconds()-c0)*1e3/float64(b.N), "cpu-ms/op")
	})
}
