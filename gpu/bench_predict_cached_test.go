package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPredictCached is Predict on a fitted regressor whose cache is
// already built (one untimed Predict builds it), so it times the forward
// pass alone: the score pass and the heads' reductions over every layer.
// It reports CPU seconds per op beside wall time (steadier on a loaded
// machine); fit-s is the untimed Fit.
func BenchmarkPredictCached(b *testing.B) {
	for _, tc := range []struct{ n, f, q int }{{10000, 8, 1000}, {10000, 32, 1000}} {
		b.Run(fmt.Sprintf("ctx=%d/f=%d/q=%d", tc.n, tc.f, tc.q), func(b *testing.B) {
			t0 := time.Now()
			r := benchFit(b, DefaultModel, tc.n, tc.f)
			defer r.Close()
			fit := time.Since(t0).Seconds()
			Xq, _ := synth(tc.q, tc.f, 22)
			if _, err := r.Predict(context.Background(), Xq); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := cpuSeconds()
			for range b.N {
				if _, err := r.Predict(context.Background(), Xq); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := cpuSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(cpu/float64(b.N), "cpu-s/op")
			}
			b.ReportMetric(fit, "fit-s")
		})
	}
}
