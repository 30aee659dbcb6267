package gpu

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkFitCores fits 1,000 rows on a pool of one core and on a pool
// of two, one after the other in the same process, so that the ratio of
// their wall times (the second core's speedup) is measured under the same
// load. It also reports CPU seconds.
func BenchmarkFitCores(b *testing.B) {
	X, y := synth(1000, 8, 21)
	for _, cores := range []int{1, 2} {
		b.Run(fmt.Sprintf("cores=%d", cores), func(b *testing.B) {
			pool := NewCorePool(cores)
			cpu0 := cpuSeconds()
			for b.Loop() {
				r, err := NewRegressor(DefaultModel, WithCorePool(pool))
				if err != nil {
					b.Fatal(err)
				}
				if err := r.Fit(context.Background(), X, y); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}
