package gpu

import (
	"fmt"
	"testing"
)

// TestAttemptHistory: the report lists every rung the ladder tried, in
// order, the last one the rung that ran: one resolved attempt when the
// first fits, and out-of-memory failures before the success on a device
// too small for the whole solve.
func TestAttemptHistory(t *testing.T) {
	X, y := synth(400, 4, 11)
	Xq, _ := synth(100, 4, 12)
	base := mustFit(t, "regressd/model-2l", X, y)
	bf16 := base.estBytes(CacheDTypeBF16)
	// The cache and 16 queries' scores fit; the 400-row solve beside
	// either cache does not (TestLadderRungs's row-chunk case).
	small := bf16 + int64(16*len(X)*headsPerLayer*4) + 32<<10
	// Room for the bf16 cache, 16 queries' scores and the solve of a
	// 200-row expert, not of the whole 400: model-2l's 1,024-row experts
	// fail, and so does 512 (one expert of 400 rows); 256 (two of 200)
	// fits. The ladder must halve down to it, not stop at the first retry.
	ws := func(m int64) int64 { return m*m*8 + int64(len(X))*int64(base.fit.f+4)*8 }
	halving := bf16 + int64(16*len(X)*headsPerLayer*4) + ws(200) + 4<<10
	for _, tc := range []struct {
		name, policy string
		device       int64
		batch        int
		queries      int
		want         string
	}{
		{"resident", `{}`, 0, 32, 100, "[resident_bf16/device/0 success resolved 32]"},
		{"one pass", `{}`, 0, 128, 100, "[no_cache//0 success resolved 100]"},
		{"plain loop", `{"gpu_budget_absolute_gb": 0, "offload_to_host": false}`, 0, 32, 100, "[plain_loop//0 success resolved 32]"},
		{"out of memory", `{"context_row_chunk": 100, "gpu_budget_frac": 1}`, small, 16, 100,
			"[resident_bf16/device/0 oom resolved 16 resident_int8/device/0 oom fallback_after_oom 16 context_row_chunk/device/100 success oom_retry 16]"},
		{"halves after out of memory", `{"allow_quantization": false, "offload_to_host": false, "gpu_budget_frac": 1}`, halving, 16, 100,
			"[resident_bf16/device/0 oom resolved 16 context_row_chunk/device/512 oom oom_retry 16 context_row_chunk/device/256 success fallback_after_oom 16]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{WithQueryBatch(tc.batch), WithPolicy(policyJSON(t, tc.policy)), WithHostMemory(0)}
			if tc.device > 0 {
				opts = append(opts, WithDevice(NewCPUDevice(tc.device)))
			}
			r, err := NewRegressor("regressd/model-2l", opts...)
			if err != nil {
				t.Fatal(err)
			}
			r.fit = base.fit
			mustPredict(t, r, Xq[:tc.queries])
			var got []string
			for _, a := range r.MemoryReport().Attempts {
				got = append(got, fmt.Sprintf("%s/%s/%d %s %s %d", a.Rung, a.Tier, a.ContextRowChunk, a.Outcome, a.Reason, a.QueryChunk))
				if (a.Outcome == OutcomeOOM) != (a.Err != "") {
					t.Errorf("attempt %+v: an error exactly when out of memory", a)
				}
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Errorf("attempts\n got %s\nwant %s", s, tc.want)
			}
			r.Close()
		})
	}
}
