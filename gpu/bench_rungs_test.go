package gpu

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

func r2(truth, pred []float64) float64 {
	var m, ssr, sst float64
	for _, v := range truth {
		m += v / float64(len(truth))
	}
	for i, v := range truth {
		ssr += (v - pred[i]) * (v - pred[i])
		sst += (v - m) * (v - m)
	}
	return 1 - ssr/sst
}

// BenchmarkRungs runs one large context (100k rows × 16 features, model-2l)
// through every rung of the memory ladder, forced with budgets and device
// sizes, on a 512-row query set in two batches. It reports each rung's time
// (cache build plus predict), the device arena's peak, the cache size, the
// RMS difference from resident_bf16 in units of the target's deviation and
// R² against the true targets.
//
//	go test -run '^$' -bench Rungs -benchtime 1x -timeout 60m ./gpu/
func BenchmarkRungs(b *testing.B) {
	const n, f, batch = 100_000, 16, 256
	X, y := synth(n, f, 31)
	Xq, yq := synth(2*batch, f, 32)
	t0 := time.Now()
	base, err := NewRegressor("regressd/model-2l", WithQueryBatch(batch))
	if err != nil {
		b.Fatal(err)
	}
	if err := base.Fit(context.Background(), X, y); err != nil {
		b.Fatal(err)
	}
	b.Logf("fit %d×%d: %.1fs", n, f, time.Since(t0).Seconds())
	bf16, int8b := base.estBytes(CacheDTypeBF16), base.estBytes(CacheDTypeInt8)
	// The solve workspace of one expert: its kernel matrix plus positions.
	ws := func(m int64) int64 { return m*m*8 + int64(n)*int64(base.fit.f+4)*8 }
	gb := func(v int64) string { return fmt.Sprintf("%.9f", float64(v)/gibF) }
	var ref []float64
	var yStd float64
	for _, v := range y {
		yStd += v * v / n
	}
	yStd = math.Sqrt(yStd)
	for _, tc := range []struct {
		rung, policy string
		device       int64
		batch        int
	}{
		{RungResidentBF16, `{}`, 0, batch},
		{RungResidentInt8, `{"gpu_budget_absolute_gb": ` + gb((bf16+int8b)/2) + `}`, 0, batch},
		{RungOffloadBF16, `{"gpu_budget_absolute_gb": 0}`, 0, batch},
		{RungOffloadInt8, `{"gpu_budget_absolute_gb": 0, "host_budget_absolute_gb": ` + gb((bf16+int8b)/2) + `}`, 0, batch},
		// An arena with room for the bf16 cache and a 512-row expert's
		// solve but not the model's ~1,021-row expert: out of memory, then
		// row chunks. Batches of 4 keep the score matrix under the solve.
		{RungContextRowChunk, `{"allow_quantization": false, "offload_to_host": false, "gpu_budget_frac": 1, "context_row_chunk": 512}`, bf16 + ws(512) + 1<<20, 4},
		{RungPlainLoop, `{"gpu_budget_absolute_gb": 0, "offload_to_host": false}`, 0, batch},
		{RungStreamBF16, `{"stream_context": true}`, 0, batch},
		{RungStreamInt8, `{"stream_context": true, "cache_dtype": "int8"}`, 0, batch},
	} {
		b.Run(tc.rung, func(b *testing.B) {
			p, err := ParsePolicy([]byte(tc.policy))
			if err != nil {
				b.Fatal(err)
			}
			dev := NewCPUDevice(tc.device)
			r, err := NewRegressor("regressd/model-2l", WithQueryBatch(tc.batch), WithPolicy(p), WithDevice(dev), WithHostMemory(64<<30))
			if err != nil {
				b.Fatal(err)
			}
			r.fit = base.fit
			var out []float64
			b.ResetTimer()
			for range b.N {
				r.Close()
				dev.ResetPeak()
				if out, err = r.Predict(context.Background(), Xq); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rep := r.MemoryReport()
			if rep.Rung != tc.rung {
				b.Fatalf("rung %s, want %s", rep.Rung, tc.rung)
			}
			if ref == nil {
				ref = out
			}
			var rms float64
			for i := range out {
				rms += (out[i] - ref[i]) * (out[i] - ref[i]) / float64(len(out))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9, "s/op")
			b.ReportMetric(float64(dev.Peak())/(1<<20), "peak-dev-MiB")
			b.ReportMetric(float64(rep.CacheBytes)/(1<<20), "cache-MiB")
			b.ReportMetric(math.Sqrt(rms)/yStd, "rms-diff/std")
			b.ReportMetric(r2(yq, out), "R²")
			r.Close()
		})
	}
}
