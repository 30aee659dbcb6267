package gpu

import (
	"encoding/json"
	"testing"
)

// TestReportJSON: the report carries the resolved policy's fields at the top
// level beside its own, and clamped/notes only when the server sets them.
func TestReportJSON(t *testing.T) {
	X, y := synth(80, 3, 41)
	Xq, _ := synth(50, 3, 42)
	r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(16))
	mustPredict(t, r, Xq)
	b, err := json.Marshal(r.MemoryReport())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rung", "est_cache_gb", "resident_gb", "query_chunk", "dropped_context_rows",
		"cache", "cache_dtype", "allow_quantization", "gpu_budget_frac", "offload_to_host", "allow_subsample"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q: %s", k, b)
		}
	}
	for _, k := range []string{"clamped", "notes"} {
		if _, ok := m[k]; ok {
			t.Errorf("local report has %q: %s", k, b)
		}
	}
	if m["rung"] != RungResidentBF16 || m["query_chunk"] != float64(16) {
		t.Errorf("rung %v query_chunk %v", m["rung"], m["query_chunk"])
	}
	// elements_budget is the cap in force, derived when the caller left it unset.
	if want := float64(DefaultDeviceMemoryBytes / 16); m["elements_budget"] != want {
		t.Errorf("elements_budget %v, want the derived %v", m["elements_budget"], want)
	}
	// A report passed back as a policy is rejected (seed, Errors rule 4).
	if _, err := ParsePolicy(b); err == nil {
		t.Error("a memory report parsed as a policy")
	}
}
