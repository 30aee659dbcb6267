package pipeline_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// large_context_* travel from the trigger to the worker's engine: with a
// policy a run succeeds (here the context is within one window, so fitted
// whole), and a thinking model, which takes no policy, fails with 400
// from the engine's large-context router.
func TestLargeContextArgumentsReachTheEngine(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "ml", Start: pipelinetest.T0, Rows: 120, GapEach: 10})
	e.CreateTrigger("ml", "request:ml", pipelinetest.Args("ml", "large_context_policy=random cluster_route,large_context_threshold=50,large_context_seed=3"))
	e.CreateTrigger("ml_thinking", "request:ml_thinking", pipelinetest.ArgsModel("ml", "regressd/model-4l-thinking", "large_context_policy=random,skip_existing=false"))
	window := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(120*time.Hour))

	status, out := e.Engine("ml", window)
	if r := pipelinetest.Result(t, out); status != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 12 {
		t.Fatalf("with a policy: HTTP %d %v", status, out)
	}
	status, out = e.Engine("ml_thinking", window)
	msg, _ := out["message"].(string)
	if status != http.StatusOK || out["status"] != "failed" || pipelinetest.Num(out["code"]) != http.StatusBadRequest ||
		!strings.Contains(msg, "thinking models do not take a large_context_policy") {
		t.Fatalf("a thinking model with a policy: HTTP %d %v", status, out)
	}
}
