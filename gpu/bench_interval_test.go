package gpu

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPredictDetailed times Predict and PredictDetailed (the central
// 80% interval's two levels, or the whole 99-level bank) side by side: each
// op runs one then the other on the same fit and query set, each building
// its own cache as a fresh query set pays it, so load on a shared machine
// hits both alike. It reports both times and their ratio, x-predict
// (target: at most 1.3).
//
//	go test -run '^$' -bench PredictDetailed -benchtime 3x ./gpu/
func BenchmarkPredictDetailed(b *testing.B) {
	for _, tc := range []struct{ n, f, q int }{{1000, 8, 1000}, {10000, 8, 1000}} {
		b.Run(fmt.Sprintf("ctx=%d/f=%d/q=%d", tc.n, tc.f, tc.q), func(b *testing.B) {
			r := benchFit(b, DefaultModel, tc.n, tc.f)
			Xq, _ := synth(tc.q, tc.f, 22)
			for _, taus := range [][]float64{{0.1, 0.9}, QuantileBank()} {
				b.Run(fmt.Sprintf("quantiles=%d", len(taus)), func(b *testing.B) {
					var point, detailed time.Duration
					for range b.N {
						r.Close()
						t0 := time.Now()
						if _, err := r.Predict(context.Background(), Xq); err != nil {
							b.Fatal(err)
						}
						r.Close()
						t1 := time.Now()
						if _, err := r.PredictDetailed(context.Background(), Xq, PredictOptions{Quantiles: taus}); err != nil {
							b.Fatal(err)
						}
						point += t1.Sub(t0)
						detailed += time.Since(t1)
					}
					b.ReportMetric(point.Seconds()/float64(b.N), "predict-s")
					b.ReportMetric(detailed.Seconds()/float64(b.N), "detailed-s")
					b.ReportMetric(detailed.Seconds()/point.Seconds(), "x-predict")
				})
			}
		})
	}
}
