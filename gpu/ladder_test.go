package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
)

// policyJSON parses a policy object or preset, failing the test on error.
func policyJSON(t *testing.T, s string) Policy {
	t.Helper()
	p, err := ParsePolicy([]byte(s))
	if err != nil {
		t.Fatalf("policy %s: %v", s, err)
	}
	return p
}

const gibF = float64(1 << 30)

// TestLadderRungs forces every rung with small device and host sizes and
// checks the report and the predictions against resident_bf16.
func TestLadderRungs(t *testing.T) {
	X, y := synth(400, 4, 11)
	Xq, _ := synth(300, 4, 12)
	const batch = 64
	base := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(batch))
	ref := mustPredict(t, base, Xq)
	bf16 := base.estBytes(CacheDTypeBF16)
	int8b := base.estBytes(CacheDTypeInt8)
	// The row-chunk case's arena: its cache and the scores of a batch of
	// 16 queries, not the 400-row solve even beside the int8 cache.
	chunkDev := bf16 + int64(16*len(X)*headsPerLayer*4) + 32<<10
	if solve := int64(len(X) * len(X) * 8); int8b+solve <= chunkDev {
		t.Fatalf("the row-chunk case needs the 400-row solve (%d bytes) to outgrow its arena (%d)", solve, chunkDev)
	}
	gb := func(b int64) string { return fmt.Sprintf("%.9f", float64(b)/gibF) }
	var yStd float64
	for _, v := range y {
		yStd += v * v / float64(len(y))
	}
	yStd = math.Sqrt(yStd)

	for _, tc := range []struct {
		name     string
		policy   string
		device   int64 // arena bytes; 0: default 24 GiB
		batch    int   // query rows per pass; 0: batch
		host     int64
		queries  int
		rung     string
		resident bool
		exact    bool // predictions bit-identical to resident_bf16
		int8     bool
	}{
		{name: "resident bf16", policy: `{}`, rung: RungResidentBF16, resident: true, exact: true},
		{name: "resident int8", policy: `{"gpu_budget_absolute_gb": ` + gb((bf16+int8b)/2) + `}`, rung: RungResidentInt8, resident: true, int8: true},
		{name: "max_context preset", policy: `"max_context"`, rung: RungResidentInt8, resident: true, int8: true},
		{name: "offload bf16", policy: `{"gpu_budget_absolute_gb": 0}`, host: 1 << 30, rung: RungOffloadBF16, exact: true},
		{name: "exact offloads instead of int8", policy: `{"allow_quantization": false, "gpu_budget_absolute_gb": ` + gb((bf16+int8b)/2) + `}`, host: 1 << 30, rung: RungOffloadBF16, exact: true},
		{name: "offload int8", policy: `{"gpu_budget_absolute_gb": 0, "host_budget_absolute_gb": ` + gb((bf16+int8b)/2) + `}`, host: 1 << 30, rung: RungOffloadInt8, int8: true},
		{name: "plain loop", policy: `{"gpu_budget_absolute_gb": 0, "offload_to_host": false}`, rung: RungPlainLoop, exact: true},
		{name: "no host RAM known", policy: `{"gpu_budget_absolute_gb": 0}`, host: 0, rung: RungPlainLoop, exact: true},
		{name: "cache off", policy: `"off"`, rung: RungNoCache, exact: true},
		{name: "one pass", policy: `{}`, queries: batch, rung: RungNoCache, exact: true},
		// The arena holds the cache and a batch's scores but not the
		// 400-row solve: out of memory, then experts of 100 rows.
		{name: "context row chunk", policy: `{"context_row_chunk": 100, "gpu_budget_frac": 1}`, device: chunkDev, batch: 16, rung: RungContextRowChunk, resident: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qb := batch
			if tc.batch > 0 {
				qb = tc.batch
			}
			opts := []Option{WithQueryBatch(qb), WithPolicy(policyJSON(t, tc.policy)), WithHostMemory(tc.host)}
			if tc.device > 0 {
				opts = append(opts, WithDevice(NewCPUDevice(tc.device)))
			}
			r, err := NewRegressor("regressd/model-2l", opts...)
			if err != nil {
				t.Fatal(err)
			}
			r.fit = base.fit // same context fit: only the cache differs
			q := Xq
			if tc.queries > 0 {
				q = Xq[:tc.queries]
			}
			p := mustPredict(t, r, q)
			rep := r.MemoryReport()
			if rep.Rung != tc.rung {
				t.Fatalf("rung = %s, want %s", rep.Rung, tc.rung)
			}
			if got, want := rep.EstCacheGB*gibF, float64(bf16); math.Abs(got-want) > 0.01*want {
				t.Errorf("est_cache_gb = %g bytes, want %d", got, bf16)
			}
			switch {
			case tc.int8:
				// int8: est/2 × (1 + 1/E), a one-byte scale per row and
				// vector; at most 0.53 × the bf16 bytes.
				want := rep.EstCacheGB * gibF / 2 * (1 + 1.0/headWidth)
				if math.Abs(float64(rep.CacheBytes)-want) > 0.01*want {
					t.Errorf("int8 cache %d bytes, want %.0f", rep.CacheBytes, want)
				}
				if r := float64(rep.CacheBytes) / float64(bf16); r > 0.53 {
					t.Errorf("int8 cache is %.4f × the bf16 bytes, want ≤ 0.53", r)
				}
			case rep.CacheBytes > 0:
				if math.Abs(float64(rep.CacheBytes)-float64(bf16)) > 0.01*float64(bf16) {
					t.Errorf("cache %d bytes, est %d", rep.CacheBytes, bf16)
				}
			}
			if tc.resident != (rep.ResidentGB > 0) {
				t.Errorf("resident_gb = %g, want resident=%v", rep.ResidentGB, tc.resident)
			}
			if tc.resident && math.Abs(rep.ResidentGB*gibF-float64(rep.CacheBytes)) > 1 {
				t.Errorf("resident_gb %g ≠ cache bytes %d", rep.ResidentGB, rep.CacheBytes)
			}
			if want := min(qb, len(q)); rep.QueryChunk != want {
				t.Errorf("query_chunk = %d, want %d", rep.QueryChunk, want)
			}
			if rep.DroppedContextRows != 0 {
				t.Errorf("dropped_context_rows = %d, want 0", rep.DroppedContextRows)
			}
			var rms float64
			for i := range p {
				rms += (p[i] - ref[i]) * (p[i] - ref[i]) / float64(len(p))
			}
			rms = math.Sqrt(rms)
			switch {
			case tc.exact:
				sameBits(t, tc.name, ref[:len(p)], p)
			case tc.int8:
				// About 0.9 % of σ here: int8 differs from bf16 by its
				// rounding alone (noiseFloor bounds the solves' cancellation).
				if rms == 0 || rms > 0.03*yStd {
					t.Errorf("int8 RMS difference %g (target scale %g): want non-zero and within 3 %% of it", rms, yStd)
				}
			default:
				if rms > 0.2*yStd {
					t.Errorf("RMS difference %g (target scale %g) too large", rms, yStd)
				}
			}
			if r.dev.Used() != rep.CacheBytes*b2i(tc.resident) {
				t.Errorf("device holds %d bytes after predict, want the resident cache only (%d)", r.dev.Used(), rep.CacheBytes*b2i(tc.resident))
			}
			r.Close()
			if r.dev.Used() != 0 {
				t.Errorf("device holds %d bytes after Close", r.dev.Used())
			}
		})
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestAdaptiveQueryChunk: an arena too small for a batch's scores halves the
// batch until it fits, unless adaptive_query_chunk is off.
func TestAdaptiveQueryChunk(t *testing.T) {
	X, y := synth(100, 4, 13)
	Xq, _ := synth(300, 4, 14)
	base := mustFit(t, "regressd/model-2l", X, y)
	ref := mustPredict(t, base, Xq)
	// 256 queries × 100 rows × H heads × 4 bytes of scores is 100·H KiB;
	// an arena of 50·H KiB holds 64 queries' and the cache, not 128's.
	for _, adaptive := range []bool{true, false} {
		r, _ := NewRegressor("regressd/model-2l", WithQueryBatch(256), WithDevice(NewCPUDevice(50*headsPerLayer<<10)),
			WithPolicy(policyJSON(t, fmt.Sprintf(`{"adaptive_query_chunk": %v}`, adaptive))))
		r.fit = base.fit
		p, err := r.Predict(context.Background(), Xq)
		if !adaptive {
			if !errors.Is(err, ErrOutOfMemory) {
				t.Errorf("adaptive off: err = %v, want ErrOutOfMemory", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rep := r.MemoryReport()
		if rep.QueryChunk != 64 || rep.Rung != RungResidentBF16 {
			t.Errorf("query_chunk %d rung %s, want 64 resident_bf16", rep.QueryChunk, rep.Rung)
		}
		sameBits(t, "halved batches", ref, p)
	}
}

// TestElementsBudget: elements_budget caps (context + query) rows ×
// features per pass, setting query_chunk; a context that cannot fit drops
// rows only with allow_subsample, else ErrContextTooLarge.
func TestElementsBudget(t *testing.T) {
	X, y := synth(100, 4, 15)
	Xq, _ := synth(120, 4, 16)
	r := mustFit(t, "regressd/model-2l", X, y, WithPolicy(policyJSON(t, `{"elements_budget": 600}`)))
	mustPredict(t, r, Xq)
	if rep := r.MemoryReport(); rep.QueryChunk != 50 || rep.DroppedContextRows != 0 {
		t.Errorf("query_chunk %d dropped %d, want 50 and 0", rep.QueryChunk, rep.DroppedContextRows)
	}
	r = mustFit(t, "regressd/model-2l", X, y, WithPolicy(policyJSON(t, `{"elements_budget": 240}`)))
	mustPredict(t, r, Xq)
	if rep := r.MemoryReport(); rep.DroppedContextRows != 41 || rep.QueryChunk != 1 {
		t.Errorf("dropped %d query_chunk %d, want 41 and 1", rep.DroppedContextRows, rep.QueryChunk)
	}
	strict, _ := NewRegressor("regressd/model-2l", WithPolicy(policyJSON(t, `{"elements_budget": 240, "allow_subsample": false}`)))
	if err := strict.Fit(context.Background(), X, y); !errors.Is(err, ErrContextTooLarge) {
		t.Errorf("allow_subsample=false: err = %v, want ErrContextTooLarge", err)
	}
}
