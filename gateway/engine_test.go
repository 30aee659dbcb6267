package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/regressd/regressd/gpu"
)

// thinkingModel returns a built-in thinking model, or skips.
func thinkingModel(t *testing.T) string {
	for _, m := range gpu.Models() {
		if m.Thinking {
			return m.Slug
		}
	}
	t.Skip("no built-in thinking model")
	return ""
}

func reportOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	rep, ok := out["memory_report"].(map[string]any)
	if !ok {
		t.Fatalf("no memory_report in %v", out)
	}
	return rep
}

// TestPredictMultiPassReachesCache: a query set larger than one pass is
// cached with no setting at all, and each preset or policy lands on its rung.
func TestPredictMultiPassReachesCache(t *testing.T) {
	g := newTestGateway(t, Config{HostMemoryBytes: 16 << 30, RateBurst: 100})
	const nTrain, nTest = 200, 1500 // more query rows than the engine's 1024-row pass
	tests := []struct {
		name     string
		policy   any
		rung     string
		resident bool
	}{
		{"no policy", nil, gpu.RungResidentBF16, true},
		{"exact", "exact", gpu.RungResidentBF16, true},
		{"max_context", "max_context", gpu.RungResidentInt8, true},
		{"off", "off", gpu.RungNoCache, false},
		{"no GPU budget offloads", map[string]any{"gpu_budget_absolute_gb": 0}, gpu.RungOffloadBF16, false},
		{"no GPU budget, int8 offload", map[string]any{"gpu_budget_absolute_gb": 0, "cache_dtype": "int8"}, gpu.RungOffloadInt8, false},
		{"nowhere to cache", map[string]any{"gpu_budget_absolute_gb": 0, "offload_to_host": false}, gpu.RungPlainLoop, false},
		{"stream", map[string]any{"stream_context": true}, gpu.RungStreamBF16, false},
		{"stream int8", map[string]any{"stream_context": true, "cache_dtype": "int8"}, gpu.RungStreamInt8, false},
	}
	var exact []any
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := map[string]any{}
			if tt.policy != nil {
				extra["memory_policy"] = tt.policy
			}
			status, _, out := g.post(t, g.key, body(nTrain, nTest, extra))
			if status != 200 {
				t.Fatalf("status %d: %v", status, out)
			}
			rep := reportOf(t, out)
			if rep["rung"] != tt.rung {
				t.Fatalf("rung=%v, want %s: %v", rep["rung"], tt.rung, rep)
			}
			if q, _ := rep["query_chunk"].(float64); q < 1 || q >= nTest {
				t.Errorf("query_chunk=%v, want a pass smaller than the %d query rows", rep["query_chunk"], nTest)
			}
			if r, _ := rep["resident_gb"].(float64); (r > 0) != tt.resident {
				t.Errorf("resident_gb=%v, want resident=%v", r, tt.resident)
			}
			if e, _ := rep["est_cache_gb"].(float64); e <= 0 {
				t.Errorf("est_cache_gb=%v, want the bf16 estimate", rep["est_cache_gb"])
			}
			preds := out["predictions"].([]any)
			if len(preds) != nTest {
				t.Fatalf("%d predictions", len(preds))
			}
			// The exact rungs agree with one another.
			switch tt.rung {
			case gpu.RungResidentBF16, gpu.RungOffloadBF16, gpu.RungPlainLoop, gpu.RungNoCache, gpu.RungStreamBF16:
				if exact == nil {
					exact = preds
				} else if d := maxDiff(exact, preds); d > 1e-6 {
					t.Errorf("%s differs from resident_bf16 by %g", tt.rung, d)
				}
			}
		})
	}
}

func maxDiff(a, b []any) float64 {
	var d float64
	for i := range a {
		x, _ := a[i].(float64)
		y, _ := b[i].(float64)
		d = math.Max(d, math.Abs(x-y))
	}
	return d
}

func TestPredictContextTooLarge(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 100})
	// 30 rows × 2 features cannot fit 20 elements with room for a query row.
	status, _, out := g.post(t, g.key, body(30, 3, map[string]any{"memory_policy": map[string]any{"elements_budget": 20, "allow_subsample": false}}))
	if status != 422 || !strings.Contains(errMessage(out), "context too large") {
		t.Fatalf("allow_subsample=false: %d %v, want 422 context too large", status, out)
	}
	// With subsampling allowed the same request answers and says what it dropped.
	status, _, out = g.post(t, g.key, body(30, 3, map[string]any{"memory_policy": map[string]any{"elements_budget": 20}}))
	if status != 200 {
		t.Fatalf("allow_subsample=true: %d %v", status, out)
	}
	if d, _ := reportOf(t, out)["dropped_context_rows"].(float64); d <= 0 {
		t.Fatalf("dropped_context_rows=%v, want > 0", reportOf(t, out)["dropped_context_rows"])
	}
	// No step smaller than one query row exists: out of memory is the caller's.
	status, _, out = g.post(t, g.key, body(30, 3, map[string]any{"memory_policy": map[string]any{"adaptive_query_chunk": false}}))
	if status != 200 {
		t.Fatalf("adaptive off on a roomy device: %d %v", status, out)
	}
}

func TestPredictOutOfDeviceMemory(t *testing.T) {
	// A 4 KiB device cannot hold one query batch's scores of 200 context rows.
	g := newTestGateway(t, Config{DeviceMemoryBytes: 4 << 10, RateBurst: 100})
	status, _, out := g.post(t, g.key, body(200, 50, map[string]any{"memory_policy": map[string]any{"adaptive_query_chunk": false}}))
	if status != 422 || !strings.Contains(errMessage(out), "out of memory") {
		t.Fatalf("%d %v, want 422 out of memory", status, out)
	}
}

func TestPredictThinkingModel(t *testing.T) {
	model := thinkingModel(t)
	g := newTestGateway(t, Config{RateBurst: 100})
	status, _, out := g.post(t, g.key, body(30, 3, map[string]any{"model": model}))
	if status != 200 {
		t.Fatalf("thinking model without a policy: %d %v", status, out)
	}
	for _, p := range []any{"exact", map[string]any{}, map[string]any{"cache": true}} {
		status, _, out = g.post(t, g.key, body(30, 3, map[string]any{"model": model, "memory_policy": p}))
		if status != 400 || !strings.Contains(errMessage(out), "thinking") {
			t.Fatalf("thinking model with policy %v: %d %v, want 400", p, status, out)
		}
	}
	// null is no policy.
	status, _, out = g.post(t, g.key, body(30, 3, map[string]any{"model": model, "memory_policy": json.RawMessage("null")}))
	if status != 200 {
		t.Fatalf("thinking model with a null policy: %d %v", status, out)
	}
}

// TestPredictAwkwardDataIsNot500: odd but valid inputs must be answered (or
// refused as the caller's), never a server error.
func TestPredictAwkwardDataIsNot500(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 1000})
	m := testModel()
	cases := map[string]string{
		"one row":          `{"model":"` + m + `","X_train":[[1]],"y_train":[2],"X_test":[[1],[3]]}`,
		"two rows":         `{"model":"` + m + `","X_train":[[1],[2]],"y_train":[2,4],"X_test":[[1.5]]}`,
		"constant target":  `{"model":"` + m + `","X_train":[[1],[2],[3],[4]],"y_train":[5,5,5,5],"X_test":[[2.5]]}`,
		"constant feature": `{"model":"` + m + `","X_train":[[1,7],[2,7],[3,7]],"y_train":[1,2,3],"X_test":[[2,7]]}`,
		"all-null column":  `{"model":"` + m + `","X_train":[[1,null],[2,null],[3,null]],"y_train":[1,2,3],"X_test":[[2,null]]}`,
		"all-null query":   `{"model":"` + m + `","X_train":[[1,2],[2,3],[3,1]],"y_train":[1,2,3],"X_test":[[null,null]]}`,
		"all cells null":   `{"model":"` + m + `","X_train":[[null],[null]],"y_train":[1,2],"X_test":[[null]]}`,
		"huge values":      `{"model":"` + m + `","X_train":[[1e300],[-1e300],[1e-300]],"y_train":[1e300,-1e300,0],"X_test":[[1e299]]}`,
		"duplicate rows":   `{"model":"` + m + `","X_train":[[1],[1],[1],[1]],"y_train":[1,2,3,4],"X_test":[[1]]}`,
		"many features":    fmt.Sprintf(`{"model":"%s","X_train":[%s],"y_train":[1,2],"X_test":[%s]}`, m, rowOf(300, 1)+","+rowOf(300, 2), rowOf(300, 1.5)),
	}
	// Engine panics on degenerate contexts, reported to the engine's owner;
	// the server turns them into a 500 and stays up. Remove a name from
	// here once the engine answers it.
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			status, _, out := g.post(t, g.key, b)
			if status >= 500 {
				t.Fatalf("status %d: %v", status, out)
			}
			if status == 200 {
				for _, p := range out["predictions"].([]any) {
					if p != nil {
						if f, ok := p.(float64); !ok || math.IsNaN(f) {
							t.Fatalf("prediction %v", p)
						}
					}
				}
			}
		})
	}
}

func rowOf(n int, v float64) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(v * float64(i%7+1))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestPredictOutOfMemoryBesideOthersIs503: a request that fits the device
// alone but not beside another prediction's resident cache is a 503 with
// Retry-After (it may fit once the other finishes), not a 422; alone, on the
// same device, it is answered.
func TestPredictOutOfMemoryBesideOthersIs503(t *testing.T) {
	X, _, Xq := linearData(300, 64)
	// Not linear: the readout must weigh the layers' heads, whose memory
	// this is about (a linear target is the trend's alone, and a pass then
	// reads no layer at all).
	y := make([]float64, len(X))
	for i, r := range X {
		y[i] = math.Sin(2*r[0]) + r[1]*r[1]
	}
	policy, err := gpu.ParsePolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	req := engineRequest{Model: testModel(), Policy: policy, X: X, Y: y, Xq: Xq[:10]}
	// another prediction keeps a resident cache on dev until closed.
	another := func(dev gpu.Device) *gpu.Regressor {
		r, err := gpu.NewRegressor(testModel(), gpu.WithDevice(dev), gpu.WithQueryBatch(16))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Fit(context.Background(), X, y); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Predict(context.Background(), Xq); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Size the device from what the request needs alone and what the
	// other prediction's cache holds.
	probe := gpu.NewCPUDevice(0)
	if _, err := newEngineOn(probe, 0)(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	alone := probe.Peak()
	o := another(probe)
	held := probe.Used()
	o.Close()
	if held == 0 {
		t.Fatal("the other prediction holds no device memory")
	}

	dev := gpu.NewCPUDevice(alone + held/2)
	predict := newEngineOn(dev, 0)
	o = another(dev)
	_, err = predict(context.Background(), req)
	if !errors.Is(err, errArenaShared) || !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("beside another prediction: err = %v, want out of memory, arena shared", err)
	}
	var br *badRequest
	if !errors.As(engineError(err), &br) || br.status != 503 || br.retryAfter <= 0 {
		t.Fatalf("mapped to %#v, want 503 with Retry-After", engineError(err))
	}
	o.Close()
	if _, err := predict(context.Background(), req); err != nil {
		t.Fatalf("alone on the same device: %v", err)
	}
}
