package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
)

// attemptsOf renders a response's attempt_history entries, one line each.
func attemptsOf(t *testing.T, out map[string]any) []string {
	t.Helper()
	hist, ok := reportOf(t, out)["attempt_history"].([]any)
	if !ok {
		t.Fatalf("no attempt_history in %v", reportOf(t, out))
	}
	var lines []string
	for _, h := range hist {
		a := h.(map[string]any)
		if len(a) != 9 {
			t.Errorf("attempt has %d fields, want the client's 9: %v", len(a), a)
		}
		b, _ := json.Marshal([]any{a["path"], a["rung"], a["cache_dtype"], a["offload_to_host"], a["context_row_chunk"], a["outcome"], a["reason"]})
		lines = append(lines, string(b))
	}
	return lines
}

// TestPredictAttemptHistory: attempt_history lists every rung the ladder
// tried, in order, in the official client's fields: one resolved attempt
// when the first rung fits; on a device that holds the cache but not the
// whole GP solve beside it, four out-of-memory attempts, then the row-chunk
// rung; and a stream rung's slice halving.
func TestPredictAttemptHistory(t *testing.T) {
	const nTrain, nTest = 200, 1100 // more query rows than one 1024-row pass
	big := newTestGateway(t, Config{HostMemoryBytes: 16 << 30, RateBurst: 100})
	status, _, out := big.post(t, big.key, body(nTrain, nTest, nil))
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if got, want := fmt.Sprint(attemptsOf(t, out)), `[["cached","resident_bf16","bf16",false,null,"success","resolved"]]`; got != want {
		t.Errorf("roomy device: attempts %s, want %s", got, want)
	}
	cache := int64(math.Round(reportOf(t, out)["est_cache_gb"].(float64) * (1 << 30)))

	// The bf16 cache and 100 KiB: not the 200-row solve (320 KB).
	small := newTestGateway(t, Config{HostMemoryBytes: 16 << 30, DeviceMemoryBytes: cache + 100<<10, RateBurst: 100})
	status, _, out = small.post(t, small.key, body(nTrain, nTest, map[string]any{"memory_policy": map[string]any{"gpu_budget_frac": 1, "context_row_chunk": 50}}))
	if status != 200 {
		t.Fatalf("small device: status %d: %v", status, out)
	}
	want := `[["cached","resident_bf16","bf16",false,null,"oom","resolved"] ` +
		`["cached","resident_int8","int8",false,null,"oom","fallback_after_oom"] ` +
		`["cached","offload_bf16","bf16",true,null,"oom","fallback_after_oom"] ` +
		`["cached","offload_int8","int8",true,null,"oom","fallback_after_oom"] ` +
		`["cached","context_row_chunk","bf16",false,50,"success","oom_retry"]]`
	if got := fmt.Sprint(attemptsOf(t, out)); got != want {
		t.Errorf("small device: attempts\n got %s\nwant %s", got, want)
	}
	if rung := reportOf(t, out)["rung"]; rung != "context_row_chunk" {
		t.Errorf("rung %v, want context_row_chunk", rung)
	}

	// Streamed on 40 KiB: the 200-row solve does not fit (320 KB), nor
	// maybe the first slice; the stream rung retries smaller experts and
	// slices until one fits, and never falls back to another rung.
	tiny := newTestGateway(t, Config{HostMemoryBytes: 16 << 30, DeviceMemoryBytes: 40 << 10, RateBurst: 100})
	status, _, out = tiny.post(t, tiny.key, body(nTrain, 20, map[string]any{"memory_policy": map[string]any{"stream_context": true, "gpu_budget_frac": 1}}))
	if status != 200 {
		t.Fatalf("stream: status %d: %v", status, out)
	}
	hist := attemptsOf(t, out)
	if len(hist) < 2 {
		t.Fatalf("stream attempts %v, want out-of-memory retries", hist)
	}
	for i, h := range hist {
		var a []any
		_ = json.Unmarshal([]byte(h), &a)
		outcome, reason := "oom", "oom_retry"
		if i == len(hist)-1 {
			outcome = "success"
		}
		if i == 0 {
			reason = "resolved"
		}
		if a[0] != "cached" || a[1] != "stream_bf16" || a[2] != "bf16" || a[3] != true || a[4] == nil || a[5] != outcome || a[6] != reason {
			t.Errorf("stream attempt %d: %s, want cached stream_bf16 bf16 in host memory with a slice, %s %s", i, h, outcome, reason)
		}
	}
}
