package pipeline_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// A trigger with quantiles writes one column per level beside the value; a
// regressed table made before gains the columns on first use (its older
// rows NULL there). A dry run returns each row's quantiles, and the task
// report counts the rows predicted outside the context's range.
func TestQuantilesEndToEnd(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "mq", Start: pipelinetest.T0, Rows: 200, GapEach: 10, Tags: map[string]string{"host": "a"}})
	e.CreateTrigger("mq_plain", "request:mq_plain", pipelinetest.Args("mq", ""))
	e.CreateTrigger("mq", "request:mq", pipelinetest.Args("mq", "quantiles=0.9 0.1 0.025"))

	status, out := e.Engine("mq_plain", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	if r := pipelinetest.Result(t, out); status != http.StatusOK || pipelinetest.Num(r["written"]) != 10 {
		t.Fatalf("plain run: HTTP %d %v", status, out)
	}
	// A row far beyond the context's range of x1 (−1…1).
	if _, err := e.Pool.Exec(t.Context(), `INSERT INTO mq ("time", x1, x2, y, host) VALUES ($1, 40, 0, NULL, 'a')`, pipelinetest.T0.Add(250*time.Hour)); err != nil {
		t.Fatal(err)
	}
	window := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(300*time.Hour))
	dry := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(300*time.Hour))
	dry["dry_run"] = true
	status, out = e.Engine("mq", dry)
	r := pipelinetest.Result(t, out)
	preds, _ := r["predictions"].([]any)
	qs, _ := r["quantiles"].(map[string]any)
	if status != http.StatusOK || r["status"] != "dry_run" || len(preds) != 11 || len(qs) != 3 {
		t.Fatalf("dry run: HTTP %d, %d predictions: %v", status, len(preds), out)
	}
	for i, p := range preds {
		v, _ := p.(float64)
		at := func(c string) float64 { x, _ := qs[c].([]any)[i].(float64); return x }
		if !(at("p2_5") <= at("p10") && at("p10") < v && v < at("p90")) {
			t.Fatalf("dry-run row %d: %v, quantiles p2_5 %v p10 %v p90 %v: not p2_5 ≤ p10 < value < p90", i, v, at("p2_5"), at("p10"), at("p90"))
		}
	}
	if n := pipelinetest.Num(r["outside_range"]); n < 1 || n > 2 {
		t.Fatalf("dry run outside_range=%v, want the row at x1=40 (1 or 2 rows)", r["outside_range"])
	}

	status, out = e.Engine("mq", window)
	r = pipelinetest.Result(t, out)
	if status != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 11 {
		t.Fatalf("quantile run: HTTP %d %v", status, out)
	}
	if n := pipelinetest.Num(r["outside_range"]); n < 1 {
		t.Fatalf("outside_range=%v, want at least the row at x1=40", r["outside_range"])
	}
	if got := e.Count(`SELECT count(*) FROM mq_regressed WHERE p10 IS NULL AND p90 IS NULL AND p2_5 IS NULL`); got != 10 {
		t.Fatalf("rows of the plain run without quantiles=%d, want 10", got)
	}
	if got := e.Count(`SELECT count(*) FROM mq_regressed WHERE p2_5 <= p10 AND p10 < value AND value < p90 AND host = 'a'`); got != 11 {
		t.Fatalf("rows with ordered quantiles=%d, want 11", got)
	}
	// The admin API's run shows the count too.
	st, body := e.Do(http.MethodGet, "/api/v3/runs/"+out["task_id"].(string), nil, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"outside_range"`) {
		t.Fatalf("run %s", body)
	}
	// The status page draws the p10–p90 band from these columns.
	st, body = e.Do(http.MethodGet, "/api/v3/triggers/mq/series?start="+pipelinetest.T0.Format(time.RFC3339)+"&end="+pipelinetest.T0.Add(300*time.Hour).Format(time.RFC3339), nil, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"intervals": true`) || !strings.Contains(string(body), `"p90":`) {
		t.Fatalf("series for the status page: HTTP %d: %.600s", st, body)
	}
}

// A level whose column a tag column of the source already names is
// refused when the trigger is made, naming both.
func TestQuantileColumnClashRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "mc", Start: pipelinetest.T0, Rows: 50, GapEach: 10, Tags: map[string]string{"p90": "a"}})
	st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
		map[string]any{"trigger_name": "mc", "trigger_specification": "request:mc", "trigger_arguments": pipelinetest.Args("mc", "quantiles=0.1 0.9")})
	if st != http.StatusBadRequest || !strings.Contains(string(body), `writes the column \"p90\", which the tag column \"p90\"`) {
		t.Fatalf("HTTP %d: %s", st, body)
	}
}

// An output table holding a quantile's column with another type fails the
// run with 409 before the model is called.
func TestQuantileColumnOfAnotherTypeRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "md", Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	// Made after the trigger: creating the trigger refuses a table already so.
	e.CreateTrigger("md", "request:md", pipelinetest.Args("md", "quantiles=0.1 0.9"))
	if _, err := e.Pool.Exec(t.Context(), `CREATE TABLE md_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL,
		model text NOT NULL, source text NOT NULL, target text NOT NULL, p90 text)`); err != nil {
		t.Fatal(err)
	}
	if st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
		map[string]any{"trigger_name": "md2", "trigger_specification": "request:md2", "trigger_arguments": pipelinetest.Args("md", "quantiles=0.1 0.9")}); st != http.StatusBadRequest ||
		!strings.Contains(string(body), `quantile column \"p90\" is text`) {
		t.Errorf("creating a trigger over the table: HTTP %d %s, want 400 naming p90", st, body)
	}
	status, out := e.Engine("md", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour)))
	msg, _ := out["message"].(string)
	if status != http.StatusOK || out["status"] != "failed" || pipelinetest.Num(out["code"]) != http.StatusConflict ||
		!strings.Contains(msg, `quantile column "p90" is text, not double precision`) {
		t.Fatalf("HTTP %d: %v", status, out)
	}
	if n := e.Count(`SELECT count(*) FROM md_regressed`); n != 0 {
		t.Fatalf("%d rows written", n)
	}
}
