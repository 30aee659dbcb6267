package gpu

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkStreamForward times the passes of stream_bf16 against
// resident_bf16 on one fit (20,000 rows × 8 features, model-4l: every head
// kind), the caches built beforehand: each round predicts 1,024 queries on
// one rung, then the other, and the medians of 5 rounds (wall and process
// CPU seconds) are reported with their ratio.
//
//	go test -run '^$' -bench StreamForward -benchtime 1x -timeout 30m ./gpu/
func BenchmarkStreamForward(b *testing.B) {
	const n, f, nq, rounds = 20_000, 8, 1024, 5
	X, y := synth(n, f, 41)
	Xq, _ := synth(nq, f, 42)
	base := mustFit(b, "regressd/model-4l", X, y)
	rungs := []struct{ name, policy string }{{RungResidentBF16, `{}`}, {RungStreamBF16, `{"stream_context": true}`}}
	regs := make([]*Regressor, len(rungs))
	for i, rg := range rungs {
		p, err := ParsePolicy([]byte(rg.policy))
		if err != nil {
			b.Fatal(err)
		}
		regs[i], err = NewRegressor("regressd/model-4l", WithPolicy(p), WithQueryBatch(256), WithHostMemory(64<<30))
		if err != nil {
			b.Fatal(err)
		}
		regs[i].fit = base.fit
		if _, err := regs[i].Predict(context.Background(), Xq); err != nil { // builds the cache
			b.Fatal(err)
		}
		if got := regs[i].MemoryReport().Rung; got != rg.name {
			b.Fatalf("rung %s, want %s", got, rg.name)
		}
	}
	wall := make([][]float64, len(rungs))
	cpu := make([][]float64, len(rungs))
	b.ResetTimer()
	for range rounds {
		for i, r := range regs {
			t0, c0 := time.Now(), cpuSeconds()
			if _, err := r.Predict(context.Background(), Xq); err != nil {
				b.Fatal(err)
			}
			wall[i] = append(wall[i], time.Since(t0).Seconds())
			cpu[i] = append(cpu[i], cpuSeconds()-c0)
		}
	}
	b.StopTimer()
	median := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	for i, rg := range rungs {
		b.Logf("%s: wall %.2f s, cpu %.2f s (medians of %d)", rg.name, median(wall[i]), median(cpu[i]), rounds)
	}
	b.ReportMetric(median(wall[1])/median(wall[0]), "stream/resident-wall")
	b.ReportMetric(median(cpu[1])/median(cpu[0]), "stream/resident-cpu")
}
