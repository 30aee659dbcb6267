package largectx

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/regressd/regressd/gpu"
)

// BenchmarkLargeContext is one request's whole time — Fit and Predict,
// clustering and every window's fit included — with the default policy
// (cluster_route, 8 groups, 2,048-row windows) on model-4l, 1,000 queries ×
// 8 features, at 50k, 100k and 200k context rows; LARGECTX_1M=1 adds 1M
// (docs/BENCHMARKS.md, "Large contexts"). The threshold is lowered to
// 10,000 so that 50,000 rows is above it (the default applies above 50k):
//
//	go test -run '^$' -bench LargeContext -benchtime 1x -timeout 60m ./gpu/largectx/
func BenchmarkLargeContext(b *testing.B) {
	sizes := []int{50_000, 100_000, 200_000}
	if os.Getenv("LARGECTX_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	const f = 8
	Xq, yq := smooth(1000, f, 2)
	newReg := func() (*gpu.Regressor, error) { return gpu.NewRegressor("regressd/model-4l") }
	cfg := Config{Policy: &Policy{Name: ClusterRoute, Groups: DefaultGroups}, Threshold: 10_000}
	for _, n := range sizes {
		X, y := smooth(n, f, 1)
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			var pred []float64
			var rep Report
			cpu0, start := cpuSeconds(), time.Now()
			for range b.N {
				var err error
				if pred, rep, err = Predict(context.Background(), cfg, newReg, X, y, Xq); err != nil {
					b.Fatal(err)
				}
			}
			per := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(per, "s/request")
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/request")
			b.ReportMetric(per/float64(n)*1e6, "µs/context-row")
			b.ReportMetric(float64(rep.NoriCalls), "calls")
			b.ReportMetric(r2(yq, pred), "R²")
		})
	}
}

// cpuSeconds is the CPU time this process has used, user and system: on a
// machine shared with other work it varies less than wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkLargeContextIntervals is the 90% interval of the default policy
// at 100,000 context rows (model-4l, 1,000 queries × 8 features): its
// coverage and mean width, with the windows fitted like one base and each
// in full (docs/BENCHMARKS.md, "Large contexts", lctx):
//
//	go test -run '^$' -bench LargeContextIntervals -benchtime 1x -timeout 60m ./gpu/largectx/
func BenchmarkLargeContextIntervals(b *testing.B) {
	X, y := smooth(100_000, 8, 1)
	Xq, yq := smooth(1000, 8, 2)
	newReg := func() (*gpu.Regressor, error) { return gpu.NewRegressor("regressd/model-4l") }
	for _, full := range []bool{false, true} {
		b.Run(fmt.Sprintf("full_fits=%v", full), func(b *testing.B) {
			cfg := Config{Policy: &Policy{Name: ClusterRoute, Groups: DefaultGroups}, FullFits: full}
			lo, hi := make([]float64, len(Xq)), make([]float64, len(Xq))
			for range b.N {
				m, err := Fit(context.Background(), cfg, newReg, X, y)
				if err != nil {
					b.Fatal(err)
				}
				_, err = m.Answer(context.Background(), Xq, func(ctx context.Context, reg *gpu.Regressor, rows [][]float64, idx []int) error {
					p, err := reg.PredictDetailed(ctx, rows, gpu.PredictOptions{Quantiles: []float64{0.05, 0.95}})
					if err != nil {
						return err
					}
					for a, q := range idx {
						lo[q], hi[q] = p.Quantiles[a][0], p.Quantiles[a][1]
					}
					return nil
				})
				m.Close()
				if err != nil {
					b.Fatal(err)
				}
			}
			in, width := 0, 0.0
			for q, v := range yq {
				if lo[q] <= v && v <= hi[q] {
					in++
				}
				width += (hi[q] - lo[q]) / float64(len(yq))
			}
			b.ReportMetric(float64(in)/float64(len(yq)), "coverage")
			b.ReportMetric(width, "width")
		})
	}
}
