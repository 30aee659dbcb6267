package gpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// Benchmarks. Run them all, with the reference matrix products in the same
// run, as docs/BENCHMARKS.md records:
//
//	go test -run '^$' -bench . -benchtime 1x ./gpu/
//
// Benchmarks report GFLOP/s where a FLOP count is meaningful; the engine's
// fraction of the machine's attainable rate is its kernel GFLOP/s over
// BenchmarkGonumGemm's.

// BenchmarkGonumGemm is the reference: gonum's pure-Go dense float32 and
// float64 matrix products (n×n by n×n, 2n³ FLOPs), using every core.
func BenchmarkGonumGemm(b *testing.B) {
	for _, n := range []int{512, 1024} {
		b.Run(fmt.Sprintf("f64/n=%d", n), func(b *testing.B) {
			a := blas64.General{Rows: n, Cols: n, Stride: n, Data: randSlice64(n * n)}
			c := blas64.General{Rows: n, Cols: n, Stride: n, Data: make([]float64, n*n)}
			start := time.Now()
			for range b.N {
				blas64.Gemm(blas.NoTrans, blas.NoTrans, 1, a, a, 0, c)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("f32/n=%d", n), func(b *testing.B) {
			d := make([]float32, n*n)
			for i, v := range randSlice64(n * n) {
				d[i] = float32(v)
			}
			a := blas32.General{Rows: n, Cols: n, Stride: n, Data: d}
			c := blas32.General{Rows: n, Cols: n, Stride: n, Data: make([]float32, n*n)}
			start := time.Now()
			for range b.N {
				blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, a, a, 0, c)
			}
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GFLOP/s")
		})
	}
}

func randSlice64(n int) []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	s := make([]float64, n)
	for i := range s {
		s[i] = r.Float64()
	}
	return s
}

// benchFit fits model on a synthetic context of n rows and f features.
func benchFit(b *testing.B, model string, n, f int, opts ...Option) *Regressor {
	b.Helper()
	X, y := synth(n, f, 21)
	r, err := NewRegressor(model, opts...)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Fit(context.Background(), X, y); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkAttention is the score kernel alone: 64 queries against every
// context row of one layer, all heads (per row and group: 2 coordinates ×
// H heads × subtract, square, add = 3·E FLOPs). Queries are spread over the
// cores in tiles as in Predict; their key slices and score buffers are made
// before the clock starts, as they are not the kernel's work. Each kernel
// this machine runs (kernel=go is the portable one, kernel=avx2 the
// assembly) is measured in the same run.
func BenchmarkAttention(b *testing.B) {
	for _, tc := range []struct{ n, f int }{{10000, 8}, {10000, 32}} {
		b.Run(fmt.Sprintf("n=%d/f=%d", tc.n, tc.f), func(b *testing.B) {
			r := benchFit(b, "regressd/model-2l", tc.n, tc.f)
			c := r.fit
			s, err := c.buildLayer(context.Background(), 0, r.dev, c.solveChunk, CacheDTypeBF16)
			if err != nil {
				b.Fatal(err)
			}
			rv, err := newRowView(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			zq, _ := c.pp.transform([][]float64{make([]float64, tc.f)})
			const nq = 64
			nb := len(c.anchors) / c.f
			qks := make([][]float32, nq)
			d2s := make([][]float32, nq)
			for q := range qks {
				qks[q] = make([]float32, nb*c.g*headWidth)
				d2s[q] = make([]float32, c.n*headsPerLayer)
				c.queryKeys(0, zq, qks[q])
			}
			for _, kern := range attendKernels() {
				b.Run("kernel="+kern.name, func(b *testing.B) {
					for range b.N {
						parallelFor(context.Background(), nq, scoreTile, func(lo, hi int) {
							c.scoresWith(kern, rv, qks[lo:hi], d2s[lo:hi])
						})
					}
					flops := float64(b.N) * nq * float64(c.n) * float64(c.g) * 3 * headWidth
					b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		})
	}
}

// BenchmarkPredict is a whole Predict (cache build included, as a fresh
// query set pays it) after Fit, at several context sizes, feature counts
// and query counts. Fit time is reported separately as fit-s.
func BenchmarkPredict(b *testing.B) {
	for _, tc := range []struct{ n, f, q int }{
		{1000, 8, 1000}, {1000, 32, 1000}, {1000, 8, 10000}, {1000, 32, 10000},
		{10000, 8, 1000}, {10000, 32, 1000}, {10000, 8, 10000}, {10000, 32, 10000},
		{100000, 8, 1000}, {100000, 32, 1000}, {100000, 8, 10000}, {100000, 32, 10000},
	} {
		b.Run(fmt.Sprintf("ctx=%d/f=%d/q=%d", tc.n, tc.f, tc.q), func(b *testing.B) {
			t0 := time.Now()
			r := benchFit(b, DefaultModel, tc.n, tc.f)
			fit := time.Since(t0).Seconds()
			Xq, _ := synth(tc.q, tc.f, 22)
			b.ResetTimer()
			for range b.N {
				r.Close() // each op builds its own cache
				if _, err := r.Predict(context.Background(), Xq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(fit, "fit-s")
		})
	}
}

// BenchmarkLinearInContext holds the query set (1000 rows, 8 features) and
// doubles the context: time per op should double too.
func BenchmarkLinearInContext(b *testing.B) {
	for _, n := range []int{2000, 4000, 8000, 16000, 32000} {
		b.Run(fmt.Sprintf("ctx=%d", n), func(b *testing.B) {
			r := benchFit(b, "regressd/model-2l", n, 8)
			Xq, _ := synth(1000, 8, 23)
			b.ResetTimer()
			for range b.N {
				r.Close()
				if _, err := r.Predict(context.Background(), Xq); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/ctx-row")
		})
	}
}

// BenchmarkCacheBuild builds every layer of the cache once.
func BenchmarkCacheBuild(b *testing.B) {
	for _, tc := range []struct {
		n     int
		dtype string
	}{{10000, CacheDTypeBF16}, {10000, CacheDTypeInt8}} {
		b.Run(fmt.Sprintf("ctx=%d/%s", tc.n, tc.dtype), func(b *testing.B) {
			r := benchFit(b, DefaultModel, tc.n, 8)
			b.ResetTimer()
			for range b.N {
				kc, err := r.build(context.Background(), tc.dtype, "device", r.fit.solveChunk)
				if err != nil {
					b.Fatal(err)
				}
				kc.res.Release()
			}
		})
	}
}

// BenchmarkCachedVsPlainLoop predicts a 10-batch query set with the cache
// (built once) and with plain_loop (the context re-processed, GP solve
// included, for every batch). The ratio is reported on the plain_loop line.
func BenchmarkCachedVsPlainLoop(b *testing.B) {
	const n, f, batch = 2000, 8, 200
	X, y := synth(n, f, 24)
	Xq, _ := synth(10*batch, f, 25)
	var cached float64
	for _, tc := range []struct{ name, policy string }{
		{"cached", `{}`},
		{"plain_loop", `{"gpu_budget_absolute_gb": 0, "offload_to_host": false}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p, _ := ParsePolicy([]byte(tc.policy))
			r, _ := NewRegressor(DefaultModel, WithQueryBatch(batch), WithPolicy(p))
			if err := r.Fit(context.Background(), X, y); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				r.Close()
				if _, err := r.Predict(context.Background(), Xq); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if tc.name == "cached" {
				cached = per
			} else if cached > 0 {
				b.ReportMetric(per/cached, "x-slower-than-cached")
			}
			b.ReportMetric(float64(len(Xq)/batch), "batches")
		})
	}
}

// BenchmarkFit is Fit alone on a 1,000-row context of 8 features, the size
// at which Fit is most of a request's time (issue 16).
func BenchmarkFit(b *testing.B) {
	X, y := synth(1000, 8, 21)
	for range b.N {
		r, err := NewRegressor(DefaultModel)
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Fit(context.Background(), X, y); err != nil {
			b.Fatal(err)
		}
	}
}
