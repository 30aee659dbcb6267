package pipeline_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// TestTriggerVendorModelAlias: with no gateway configured, a trigger may
// name a built-in model by the vendor's slug (what the retired slug's
// message suggests). The run uses the built-in model; the model column
// records the name the trigger gave, as skip_existing and plugin users
// expect.
func TestTriggerVendorModelAlias(t *testing.T) {
	const alias = "synthefy/nori-30m"
	if _, ok := gpu.ResolveModel(alias); !ok {
		t.Fatalf("%s is no alias of a built-in model", alias)
	}
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "vend", Start: pipelinetest.T0, Rows: 60, GapEach: 5}, pipelinetest.ArgsModel("vend", alias, ""))
	st, out := e.Engine("vend", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r := pipelinetest.Result(t, out)
	if st != http.StatusOK || out["status"] != "success" || pipelinetest.Num(r["written"]) != 12 {
		t.Fatalf("run with model=%s: HTTP %d %v", alias, st, out)
	}
	if n := e.Count(`SELECT count(*) FROM vend_regressed WHERE model = $1`, alias); n != 12 {
		t.Errorf("%d rows with model %q, want 12", n, alias)
	}
	// Unknown and retired slugs are still refused.
	for _, model := range []string{"synthefy/nope", "synthefy/nori"} {
		st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
			map[string]any{"trigger_name": "bad", "trigger_specification": "request:bad", "trigger_arguments": pipelinetest.ArgsModel("vend", model, "")})
		if st != http.StatusBadRequest {
			t.Errorf("model=%s: HTTP %d %s, want 400", model, st, body)
		}
	}
}
