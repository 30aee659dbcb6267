package pipeline_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// fleetTable fills one measurement with three series: site a (100 rows, 20
// to fill), site b (15 rows: 12 with a target, under min_history=20) and
// site c (60 rows, 15 to fill); a and b are in region eu, c in us.
func fleetTable(e *pipelinetest.Env, table string) {
	e.MakeTable(pipelinetest.SeriesSpec{Table: table, Tags: map[string]string{"site": "a", "region": "eu"}, Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	e.MakeTable(pipelinetest.SeriesSpec{Table: table, Tags: map[string]string{"site": "b", "region": "eu"}, Start: pipelinetest.T0, Rows: 15, GapEach: 5})
	e.MakeTable(pipelinetest.SeriesSpec{Table: table, Tags: map[string]string{"site": "c", "region": "us"}, Start: pipelinetest.T0, Rows: 60, GapEach: 4})
}

// published is, per group_by run published, its packs and its series
// published alone (the producer's log).
func published(e *pipelinetest.Env) [][2]int {
	var out [][2]int
	for _, m := range regexp.MustCompile(`group_by run published.* packs=(\d+) series_alone=(\d+)`).FindAllStringSubmatch(e.Logs.String(), -1) {
		packs, _ := strconv.Atoi(m[1])
		alone, _ := strconv.Atoi(m[2])
		out = append(out, [2]int{packs, alone})
	}
	return out
}

// seriesByTag indexes a reply's series_results by one tag's value.
func seriesByTag(t *testing.T, r map[string]any, tag string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	list, _ := r["series_results"].([]any)
	for _, v := range list {
		s := v.(map[string]any)
		tags, _ := s["tags"].(map[string]any)
		name, _ := tags[tag].(string)
		out[name] = s
	}
	return out
}

// vendorStandIn is a vendor gateway that predicts 2·x₀ − x₁; refuse, given
// the rows a call predicts, may answer it instead (writing the response
// and returning true). It returns the gateway's URL.
func vendorStandIn(t *testing.T, refuse func(w http.ResponseWriter, rows int) bool) string {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			XTest [][]*float64 `json:"X_test"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if refuse(w, len(req.XTest)) {
			return
		}
		preds := make([]float64, len(req.XTest))
		for i, row := range req.XTest {
			preds[i] = *row[0]*2 - *row[1]
		}
		json.NewEncoder(w).Encode(map[string]any{"task": "regression", "predictions": preds,
			"usage": map[string]int{"input_tokens": 1, "output_tokens": len(preds), "total_tokens": 1 + len(preds)}})
	}))
	t.Cleanup(vendor.Close)
	return vendor.URL
}

// failingFifteen is vendorStandIn refusing every call that predicts 15
// rows (site c's batch in fleetTable).
func failingFifteen(t *testing.T) string {
	return vendorStandIn(t, func(w http.ResponseWriter, rows int) bool {
		if rows != 15 {
			return false
		}
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": "injected"})
		return true
	})
}

// A series of a pack refused once with 429 is tried again alone: the
// others' predictions are kept, not asked for again (which spent a key's
// rate and could fail a series whose prediction had come back).
func TestGroupByPackRetriesOnlyTheFailedSeries(t *testing.T) {
	var mu sync.Mutex
	calls := map[int]int{} // by rows predicted: a 20, c 15
	url := vendorStandIn(t, func(w http.ResponseWriter, rows int) bool {
		mu.Lock()
		calls[rows]++
		first := calls[rows] == 1
		mu.Unlock()
		if rows != 15 || !first {
			return false
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]string{"error": "slow down"})
		return true
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", url)
	fleetTable(e, "flaky")
	e.CreateTrigger("flaky", "request:flaky", pipelinetest.ArgsModel("flaky", "vendor/model-x", "group_by=site,predict_batch_size=100,max_retries=3"))
	st, out := e.Engine("flaky", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r := pipelinetest.Result(t, out)
	if st != http.StatusOK || out["status"] != "success" || pipelinetest.Num(r["written"]) != 35 {
		t.Fatalf("HTTP %d %v, want success (b skipped) with 35 written", st, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls[20] != 1 || calls[15] != 2 {
		t.Errorf("calls by rows %v, want a (20 rows) once and c (15) twice", calls)
	}
}

func TestGroupByPartial(t *testing.T) {
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", failingFifteen(t))
	fleetTable(e, "fleet")
	e.CreateTrigger("fleet", "request:fleet", pipelinetest.ArgsModel("fleet", "vendor/model-x", "group_by=site,predict_batch_size=100"))
	st, out := e.Engine("fleet", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r := pipelinetest.Result(t, out)
	if st != http.StatusOK || out["status"] != "partial" || pipelinetest.Num(r["written"]) != 20 {
		t.Fatalf("HTTP %d %v, want partial with 20 written", st, out)
	}
	c, _ := r["series"].(map[string]any)
	if pipelinetest.Num(c["total"]) != 3 || pipelinetest.Num(c["succeeded"]) != 1 || pipelinetest.Num(c["skipped"]) != 1 || pipelinetest.Num(c["failed"]) != 1 {
		t.Fatalf("series %v, want 3: 1 succeeded, 1 skipped, 1 failed", r["series"])
	}
	s := seriesByTag(t, r, "site")
	if s["a"]["status"] != "success" || pipelinetest.Num(s["a"]["written"]) != 20 ||
		s["b"]["status"] != "skipped" || !strings.Contains(s["b"]["message"].(string), "min_history=20") ||
		s["c"]["status"] != "failed" || !strings.Contains(s["c"]["message"].(string), "injected") {
		t.Fatalf("series_results %v", r["series_results"])
	}
	if tags := s["a"]["tags"].(map[string]any); tags["region"] != "eu" {
		t.Errorf("site a's tags %v, want region eu too", tags)
	}
	if !strings.Contains(r["message"].(string), "first failure (region:us site:c): gateway: HTTP 400") {
		t.Errorf("message %q, want the first failure named", r["message"])
	}
	// Every series (b's skip included) traveled in one pack.
	if got := published(e); len(got) != 1 || got[0] != [2]int{1, 0} {
		t.Errorf("published (packs, series alone) %v, want one pack and none alone", got)
	}
	// Every point carries its series' tags; nothing for b or c.
	if got := e.Count(`SELECT count(*) FROM fleet_regressed WHERE site = 'a' AND region = 'eu'`); got != 20 {
		t.Errorf("site a: %d rows, want 20", got)
	}
	if got := e.Count(`SELECT count(*) FROM fleet_regressed WHERE site <> 'a'`); got != 0 {
		t.Errorf("sites b and c: %d rows, want none", got)
	}
	// The task's report lists every series.
	taskID := out["task_id"].(string)
	code, body := e.Do(http.MethodGet, "/api/v3/runs/"+taskID, nil, nil)
	var rep struct {
		Run struct {
			Status string `json:"status"`
		} `json:"run"`
		Series        map[string]int   `json:"series"`
		SeriesResults []map[string]any `json:"series_results"`
	}
	if err := json.Unmarshal(body, &rep); err != nil || code != http.StatusOK {
		t.Fatalf("report: HTTP %d %s", code, body)
	}
	if rep.Run.Status != "partial" || rep.Series["total"] != 3 || len(rep.SeriesResults) != 3 {
		t.Errorf("report %s, want partial with 3 series listed", body)
	}
	// Series are not runs of their own in the runs list.
	_, body = e.Do(http.MethodGet, "/api/v3/runs?trigger=fleet", nil, nil)
	if n := strings.Count(string(body), `"task_id"`); n != 1 {
		t.Errorf("runs list holds %d runs, want the one: %s", n, body)
	}
	// Run again: a's points exist (skip_existing), c fails again, b is
	// still short.
	_, out = e.Engine("fleet", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r = pipelinetest.Result(t, out)
	s = seriesByTag(t, r, "site")
	if out["status"] != "failed" || s["a"]["status"] != "skipped" || pipelinetest.Num(s["a"]["skipped_existing"]) != 20 {
		t.Errorf("second run %v, want failed (c failed, a and b skipped) with a's 20 rows skipped as existing", out)
	}
}

// A series too large for a pack runs alone beside a pack of the others:
// a's 20 rows in batches of 16 and 4 alone; b's skip and c's failing batch
// in one pack. A dry run of the same packs returns every series' own
// predictions.
func TestGroupByPackBesideALoneSeries(t *testing.T) {
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", failingFifteen(t))
	fleetTable(e, "mixed")
	win := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))
	e.CreateTrigger("mixed", "request:mixed", pipelinetest.ArgsModel("mixed", "vendor/model-x", "group_by=site,predict_batch_size=16"))
	_, out := e.Engine("mixed", win)
	r := pipelinetest.Result(t, out)
	s := seriesByTag(t, r, "site")
	if out["status"] != "partial" || pipelinetest.Num(r["written"]) != 20 || s["a"]["status"] != "success" || pipelinetest.Num(s["a"]["written"]) != 20 ||
		s["b"]["status"] != "skipped" || !strings.Contains(s["b"]["message"].(string), "min_history=20") ||
		s["c"]["status"] != "failed" || !strings.Contains(s["c"]["message"].(string), "injected") {
		t.Fatalf("run %v, want partial: a written alone, b skipped and c failed in a pack", out)
	}
	if got := published(e); len(got) != 1 || got[0] != [2]int{1, 1} {
		t.Errorf("published (packs, series alone) %v, want one pack and a alone", got)
	}
	if got := e.Count(`SELECT count(DISTINCT "time") FROM mixed_regressed WHERE site = 'a'`); got != 20 {
		t.Errorf("site a: %d rows, want 20", got)
	}
	// A dry run where every series fits a pack: each its own predictions.
	e.CreateTrigger("mixdry", "request:mixdry", pipelinetest.ArgsModel("mixed", "vendor/model-x", "group_by=site,predict_batch_size=100,dry_run=true,skip_existing=false"))
	_, out = e.Engine("mixdry", win)
	r = pipelinetest.Result(t, out)
	s = seriesByTag(t, r, "site")
	pa, _ := s["a"]["predictions"].([]any)
	if out["status"] != "partial" || len(pa) != 20 || s["b"]["status"] != "skipped" || s["c"]["status"] != "failed" {
		t.Fatalf("dry run %v, want a's 20 predictions, b skipped, c failed", out)
	}
	// Site a's predictions come as a single series' do: numbers aligned
	// with the query rows, their times alongside.
	if ta, _ := s["a"]["times"].([]any); len(ta) != len(pa) {
		t.Errorf("site a: %d times for %d predictions", len(ta), len(pa))
	}
	for _, p := range pa {
		if _, ok := p.(float64); !ok {
			t.Errorf("site a prediction %v, want a number", p)
		}
	}
	if got := published(e); len(got) != 2 || got[1] != [2]int{1, 0} {
		t.Errorf("published (packs, series alone) %v, want the dry run in one pack", got)
	}
}

func TestGroupByRefusalsAndCaps(t *testing.T) {
	e := pipelinetest.Start(t)
	fleetTable(e, "fl")
	win := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))
	// Without group_by a window of many series is refused as before.
	e.CreateTrigger("one", "request:one", pipelinetest.Args("fl", ""))
	if _, out := e.Engine("one", win); out["status"] != "failed" || !strings.Contains(out["message"].(string), "the window holds 3 series") {
		t.Errorf("without group_by: %v, want the one-series refusal", out)
	}
	// A tag outside group_by that varies within a series.
	e.CreateTrigger("region", "request:region", pipelinetest.Args("fl", "group_by=region"))
	if _, out := e.Engine("region", win); out["status"] != "failed" || !strings.Contains(out["message"].(string), `"site" (e.g. within region:eu)`) ||
		pipelinetest.Num(out["code"]) != http.StatusBadRequest {
		t.Errorf("tag conflict: %v, want a 400 refusal naming site", out)
	}
	// group_by names a column that is no tag: refused when the trigger is
	// created.
	if st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
		map[string]any{"trigger_name": "nocol", "trigger_specification": "request:nocol", "trigger_arguments": pipelinetest.Args("fl", "group_by=station")}); st != http.StatusBadRequest ||
		!strings.Contains(string(body), `group_by: \"station\" is not a tag column`) {
		t.Errorf("unknown column at creation: HTTP %d %s", st, body)
	}

	// A request body cannot set group_by.
	body := map[string]any{"group_by": "site"}
	for k, v := range win {
		body[k] = v
	}
	if st, out := e.Engine("one", body); st != http.StatusBadRequest || !strings.Contains(out["message"].(string), "operator setting") {
		t.Errorf("group_by in a body: HTTP %d %v, want 400", st, out)
	}
	// max_run_predict_rows: a gets its 20 rows, c 5 of its 15, named.
	e.CreateTrigger("cap", "request:cap", pipelinetest.Args("fl", "group_by=site region,max_run_predict_rows=25,dry_run=true"))
	_, out := e.Engine("cap", win)
	r := pipelinetest.Result(t, out)
	s := seriesByTag(t, r, "site")
	if out["status"] != "dry_run" || !strings.Contains(r["message"].(string), "max_run_predict_rows=25 cut 1 series (region:us site:c): 10 rows not predicted") {
		t.Fatalf("cap: %v", out)
	}
	// A dry run returns each series' predictions; nothing is written.
	if pa, _ := s["a"]["predictions"].([]any); len(pa) != 20 {
		t.Errorf("dry run: site a has %d predictions, want 20", len(pa))
	}
	if pc, _ := s["c"]["predictions"].([]any); len(pc) != 5 {
		t.Errorf("dry run: site c has %d predictions, want 5 (the newest)", len(pc))
	}
	if s["b"]["status"] != "skipped" {
		t.Errorf("site b: %v, want skipped", s["b"])
	}
	if got := e.Count(`SELECT count(*) FROM pg_tables WHERE tablename = 'fl_regressed'`); got != 0 {
		t.Errorf("a dry run created the output table")
	}
}

func TestGroupByScheduled(t *testing.T) {
	e := pipelinetest.Start(t)
	now := time.Now().UTC()
	for _, site := range []string{"a", "b"} {
		e.MakeTable(pipelinetest.SeriesSpec{Table: "fsched", Tags: map[string]string{"site": site}, Start: now.Add(-100 * time.Hour), Rows: 100, GapEach: 5})
	}
	e.CreateTrigger("fsched", "every:1s", pipelinetest.Args("fsched", "window=10d,group_by=site"))
	const runs = `SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'fsched' AND parent_id = '' AND series_total = 2 AND status <> 'running'`
	pipelinetest.WaitUntil(t, 60*time.Second, func() bool { return e.Count(runs) >= 3 }, "three scheduled group_by runs")
	for _, site := range []string{"a", "b"} {
		if got := e.Count(`SELECT count(DISTINCT "time") FROM fsched_regressed WHERE site = $1`, site); got != 20 {
			t.Errorf("site %s: %d rows, want 20 (each gap once)", site, got)
		}
	}
	if got := e.Count(`SELECT count(*) FROM fsched_regressed`); got != 40 {
		t.Errorf("%d rows, want 40", got)
	}
	if got := e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'fsched' AND parent_id = '' AND status = 'success'`); got != 1 {
		t.Errorf("%d runs wrote; want exactly 1 (the rest skipped: every series' gaps already predicted)", got)
	}
}
