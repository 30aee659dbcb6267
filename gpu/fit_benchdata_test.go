package gpu

import (
	"context"
	"testing"

	"github.com/regressd/regressd/gpu/largectx/largectxtest"
)

// BenchmarkFitBenchData fits the 1,000-row context of `regressd bench
// engine`'s 1k cell (largectxtest.Smooth(1000, 8, 1)) with model-4l and
// model-2l on a pool of one core, with the process's CPU seconds per Fit:
// the figure a profile of Fit's phases (-cpuprofile) is read against.
func BenchmarkFitBenchData(b *testing.B) {
	X, y := largectxtest.Smooth(1000, 8, 1)
	for _, model := range []string{"regressd/model-4l", "regressd/model-2l"} {
		b.Run(model[len("regressd/"):], func(b *testing.B) {
			pool := NewCorePool(1)
			cpu0 := cpuSeconds()
			for b.Loop() {
				r, err := NewRegressor(model, WithCorePool(pool))
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
