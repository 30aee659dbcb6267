package pipeline_test

// What a user of the InfluxDB 3 plugin relies on, against the running
// pipeline (issue 18, the trigger side): replies that mirror the run,
// repeated requests that run again, the plugin's arguments and config
// file, max_retries as attempts, the key from the environment, the
// single-series rule on usable rows, and dry-run predictions as a list.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

// nullingVendor stands in for the vendor's hosted gateway: it answers like
// it, except that the first row of every call gets no prediction (null),
// and the calls fail() picks fail with the status it returns.
func nullingVendor(t *testing.T, fail func(call int64) int) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if code := fail(n); code != 0 {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"error": "injected"})
			return
		}
		var req struct {
			XTest [][]float64 `json:"X_test"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		preds := make([]*float64, len(req.XTest))
		for i, row := range req.XTest {
			if i > 0 {
				v := 2*row[0] - row[1]
				preds[i] = &v
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"task": "regression", "predictions": preds})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// hundredHours is the window of a synthetic table of 100 rows.
var hundredHours = pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))

func TestRepliesMirrorTheRunStatus(t *testing.T) {
	var failing atomic.Int64 // the call that fails with 400; 0 for none
	vendor, calls := nullingVendor(t, func(n int64) int {
		if n == failing.Load() {
			return http.StatusBadRequest
		}
		return 0
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL, "--concurrency", "1")
	spec := func(name string) pipelinetest.SeriesSpec {
		return pipelinetest.SeriesSpec{Table: name, Start: pipelinetest.T0, Rows: 100, GapEach: 5}
	}
	e.Table(spec("ok"), pipelinetest.ArgsModel("ok", "vendor/model-x", ""))
	e.Table(pipelinetest.SeriesSpec{Table: "few", Start: pipelinetest.T0, Rows: 30, GapEach: 2}, pipelinetest.ArgsModel("few", "vendor/model-x", ""))
	e.Table(spec("dry"), pipelinetest.ArgsModel("dry", "vendor/model-x", ""))
	e.Table(spec("part"), pipelinetest.ArgsModel("part", "vendor/model-x", "predict_batch_size=10"))
	e.Table(spec("bad"), pipelinetest.ArgsModel("bad", "vendor/model-x", ""))

	run := func(trigger string, body map[string]any) map[string]any {
		t.Helper()
		st, out := e.Engine(trigger, body)
		r := pipelinetest.Result(t, out)
		if st != http.StatusOK || out["status"] != r["status"] {
			t.Fatalf("%s: HTTP %d %v: want 200 with the result's status at the top", trigger, st, out)
		}
		return out
	}
	if out := run("ok", hundredHours); out["status"] != "success" || pipelinetest.Num(pipelinetest.Result(t, out)["written"]) != 19 {
		t.Errorf("ok: %v, want success with 19 written (one row has no prediction)", out)
	}
	if out := run("few", hundredHours); out["status"] != "skipped" || !strings.Contains(pipelinetest.Result(t, out)["message"].(string), "min_history=20") {
		t.Errorf("few: %v, want skipped", out)
	}

	// A dry run's predictions: one per query row, null where the model
	// gave none, the rows' times alongside.
	dry := map[string]any{"dry_run": true}
	for k, v := range hundredHours {
		dry[k] = v
	}
	out := run("dry", dry)
	r := pipelinetest.Result(t, out)
	preds, _ := r["predictions"].([]any)
	times, _ := r["times"].([]any)
	if out["status"] != "dry_run" || len(preds) != 20 || len(times) != 20 || pipelinetest.Num(r["query_rows"]) != 20 || pipelinetest.Num(r["written"]) != 0 {
		t.Fatalf("dry: %v, want 20 predictions and 20 times, nothing written", out)
	}
	if preds[0] != nil {
		t.Errorf("dry: first prediction %v, want null (the vendor gave none)", preds[0])
	}
	for i, p := range preds[1:] {
		if _, ok := p.(float64); !ok {
			t.Errorf("dry: prediction %d is %v, want a number", i+1, p)
		}
	}
	if first, _ := times[0].(string); first != pipelinetest.T0.Format(time.RFC3339) {
		t.Errorf("dry: first time %v, want the first query row's, %s", times[0], pipelinetest.T0.Format(time.RFC3339))
	}

	failing.Store(calls.Load() + 2) // part's second batch
	if out := run("part", hundredHours); out["status"] != "partial" || pipelinetest.Num(pipelinetest.Result(t, out)["remaining"]) != 10 {
		t.Errorf("part: %v, want partial with 10 remaining", out)
	}
	failing.Store(calls.Load() + 1)
	out = run("bad", hundredHours)
	if out["status"] != "failed" || pipelinetest.Num(out["code"]) != http.StatusBadRequest || !strings.Contains(out["message"].(string), "HTTP 400") {
		t.Errorf("bad: %v, want failed (HTTP 200) with code 400", out)
	}
}

// Asked for again once its run ended, a window is a new run that reports
// what it did; asked for while it runs, it is that run.
func TestRepeatedRequestIsANewRun(t *testing.T) {
	e := pipelinetest.Start(t)
	// window=6000min: the plugin's minute unit; 100 hours before end_time.
	e.Table(pipelinetest.SeriesSpec{Table: "again", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.Args("again", "window=6000min"))
	end := pipelinetest.T0.Add(100 * time.Hour)
	st, first := e.Engine("again", map[string]any{"end_time": end.Format(time.RFC3339)})
	if r := pipelinetest.Result(t, first); st != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 20 {
		t.Fatalf("first: HTTP %d %v", st, first)
	}
	// The same window, its end written as ISO with a space.
	st, second := e.Engine("again", map[string]any{"end_time": end.Format("2006-01-02 15:04:05")})
	r := pipelinetest.Result(t, second)
	if st != http.StatusOK || second["status"] != "skipped" || second["task_id"] == first["task_id"] ||
		pipelinetest.Num(r["written"]) != 0 || pipelinetest.Num(r["skipped_existing"]) != 20 {
		t.Fatalf("second: HTTP %d %v, want a new task: skipped, written 0, skipped_existing 20", st, second)
	}
	if r["window_start"] != pipelinetest.Result(t, first)["window_start"] {
		t.Errorf("windows differ: %v and %v", r["window_start"], pipelinetest.Result(t, first)["window_start"])
	}
	if n := e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'again'`); n != 2 {
		t.Errorf("%d tasks in the ledger, want 2 runs", n)
	}
}

// max_retries counts attempts at a gateway call, end to end: 3 is at most
// three calls whatever the pipeline redelivers, 1 is one.
func TestMaxRetriesCountsGatewayCalls(t *testing.T) {
	vendor, calls := pipelinetest.FakeVendor(t, func(int64) int { return http.StatusInternalServerError })
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	for _, tc := range []struct {
		retries int
		calls   int64
	}{{3, 3}, {1, 1}} {
		name := "retry" + string(rune('0'+tc.retries))
		e.Table(pipelinetest.SeriesSpec{Table: name, Start: pipelinetest.T0, Rows: 100, GapEach: 5},
			pipelinetest.ArgsModel(name, "vendor/model-x", "max_retries="+string(rune('0'+tc.retries))))
		before := calls.Load()
		st, out := e.Engine(name, hundredHours)
		if st != http.StatusOK || out["status"] != "failed" || !strings.Contains(out["message"].(string), "HTTP 500") {
			t.Fatalf("max_retries=%d: HTTP %d %v, want a failed run", tc.retries, st, out)
		}
		// Let any redelivery that would call again come and go.
		time.Sleep(3 * time.Second)
		if got := calls.Load() - before; got != tc.calls {
			t.Errorf("max_retries=%d: the gateway got %d calls, want %d", tc.retries, got, tc.calls)
		}
	}
}

// max_retries counts attempts at a write too: a write the output table
// keeps refusing with a transient error is attempted that many times, then
// its predictions are dead-lettered and the run fails.
func TestMaxRetriesCountsWrites(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "w", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	// Every attempt takes a number from the sequence (which no rollback
	// returns), then fails as a serialization failure would.
	if _, err := e.Pool.Exec(context.Background(), `
		CREATE SEQUENCE write_attempts;
		CREATE TABLE w_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL, model text NOT NULL, source text NOT NULL, target text NOT NULL);
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM nextval('write_attempts'); RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON w_regressed FOR EACH STATEMENT EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	e.CreateTrigger("w", "request:w", pipelinetest.Args("w", "max_retries=2"))
	st, out := e.Engine("w", hundredHours)
	if st != http.StatusOK || out["status"] != "failed" || !strings.Contains(out["message"].(string), "write failed 2 times (max_retries=2)") {
		t.Fatalf("HTTP %d %v, want a failed run saying the write failed twice", st, out)
	}
	if n := e.Count(`SELECT last_value FROM write_attempts`); n != 2 {
		t.Errorf("%d write attempts, want 2", n)
	}
	if n := len(e.DeadLetters(schemas.SubjectDLQ + ">")); n != 1 {
		t.Errorf("%d dead letters, want the one result with its predictions", n)
	}
}

// With no key header, an HTTP trigger's run uses SERVICE_API_KEY from the
// server's environment; a header, either name, wins.
func TestEngineKeyFromTheEnvironment(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "test-key") // what the fake vendor grants
	vendor, _ := pipelinetest.FakeVendor(t, func(int64) int { return 0 })
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.Table(pipelinetest.SeriesSpec{Table: "k", Start: pipelinetest.T0, Rows: 300, GapEach: 5}, pipelinetest.ArgsModel("k", "vendor/model-x", ""))
	call := func(headers map[string]string, hours int) map[string]any {
		t.Helper()
		st, raw := e.Do(http.MethodPost, "/api/v3/engine/k", headers, pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(time.Duration(hours)*time.Hour)))
		var out map[string]any
		json.Unmarshal(raw, &out)
		if st != http.StatusOK {
			t.Fatalf("headers %v: HTTP %d %s", headers, st, raw)
		}
		return out
	}
	if out := call(nil, 100); out["status"] != "success" {
		t.Errorf("no header: %v, want the environment's key used", out)
	}
	if out := call(map[string]string{"X-Nori-Api-Key": "test-key"}, 200); out["status"] != "success" {
		t.Errorf("X-Nori-Api-Key: %v, want success", out)
	}
	if out := call(map[string]string{"X-Nori-Api-Key": "wrong"}, 300); out["status"] != "failed" || pipelinetest.Num(out["code"]) != http.StatusForbidden {
		t.Errorf("a wrong key in the header: %v, want the gateway's 403 (the header wins)", out)
	}
}

// The single-series rule counts the rows a run uses: another series whose
// rows lack a feature, or rows whose tag is NULL or empty alike, are no
// second series.
func TestSingleSeriesCountsUsableRows(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "s", Start: pipelinetest.T0, Rows: 100, GapEach: 5, Tags: map[string]string{"host": "a"}})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "s", Start: pipelinetest.T0.Add(time.Minute), Rows: 50, GapEach: 5, Tags: map[string]string{"host": "b"}})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "n", Start: pipelinetest.T0, Rows: 100, GapEach: 5, Tags: map[string]string{"host": ""}})
	if _, err := e.Pool.Exec(context.Background(), `UPDATE s SET x2 = NULL WHERE host = 'b'; UPDATE n SET host = NULL WHERE extract(hour FROM "time")::int % 2 = 0`); err != nil {
		t.Fatal(err)
	}
	e.CreateTrigger("s", "request:s", pipelinetest.Args("s", ""))
	e.CreateTrigger("n", "request:n", pipelinetest.Args("n", ""))
	for _, trig := range []string{"s", "n"} {
		st, out := e.Engine(trig, hundredHours)
		if r := pipelinetest.Result(t, out); st != http.StatusOK || out["status"] != "success" || pipelinetest.Num(r["written"]) != 20 {
			t.Errorf("%s: HTTP %d %v, want one series, 20 written", trig, st, out)
		}
	}
	if n := e.Count(`SELECT count(*) FROM s_regressed WHERE host = 'a'`); n != 20 {
		t.Errorf("%d predictions tagged host=a, want 20", n)
	}
}

// A schedule over a fixed window (start_time and end_time as arguments)
// backfills it once; later ticks call no model.
func TestFixedWindowScheduleBackfillsOnce(t *testing.T) {
	vendor, calls := pipelinetest.FakeVendor(t, func(int64) int { return 0 })
	t.Setenv("SERVICE_API_KEY", "test-key")
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "fixed", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "preview", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	window := "start_time=2026-01-01 00:00:00,end_time=2026-01-05T04:00:00Z"
	e.CreateTrigger("fixed", "every:1s", pipelinetest.ArgsModel("fixed", "vendor/model-x", window))
	e.CreateTrigger("preview", "every:1s", pipelinetest.ArgsModel("preview", "vendor/model-x", window+",dry_run=true"))
	pipelinetest.WaitUntil(t, 30*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'fixed' AND status = 'success'`) >= 1 &&
			e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'preview' AND status = 'dry_run'`) >= 1
	}, "the first runs")
	after := calls.Load()
	time.Sleep(4 * time.Second) // four more ticks of each
	if got := calls.Load(); got != after || got != 2 {
		t.Errorf("the gateway got %d calls (%d after the first runs), want 2: one per trigger", got, got-after)
	}
	if n := e.Count(`SELECT count(*) FROM fixed_regressed`); n != 20 {
		t.Errorf("%d rows written, want the window's 20", n)
	}
	if n := e.Count(`SELECT count(*) FROM pg_tables WHERE tablename = 'preview_regressed'`); n != 0 {
		t.Error("a dry_run schedule created its output table")
	}
}

// A trigger whose config_file_path names a TOML file takes every argument
// from it (names with spaces, a tags table, the write targets), reads it
// again at every run, and takes no body.
func TestConfigFileTrigger(t *testing.T) {
	dir := t.TempDir()
	conf := func(extra string) {
		t.Helper()
		body := `measurement = "air"
field = "y"
feature_fields = ["x one", "x two"]
model = "` + pipelinetest.DefaultModel() + `"
min_history = 10
start_time = 2026-01-01T00:00:00Z
end_time = "2026-01-05 04:00:00"
output_measurement = "filled"
target_database = "predictions"
` + extra + `
[tags]
"the site" = "North Yard"
`
		if err := os.WriteFile(filepath.Join(dir, "air.toml"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf("")
	e := pipelinetest.Start(t, "--config-dir", dir)
	makeOddTable(e, "air", "y", "x one", "x two", "the site", "North Yard", 100)
	e.CreateTrigger("air", "request:air", "config_file_path=air.toml")
	nori := map[string]string{"X-Nori-Api-Key": "k"}
	call := func(body any) (int, map[string]any) {
		t.Helper()
		st, raw := e.Do(http.MethodPost, "/api/v3/engine/air", nori, body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("HTTP %d %s", st, raw)
		}
		return st, out
	}
	if st, out := call(map[string]any{}); st != http.StatusOK || out["status"] != "success" || pipelinetest.Num(pipelinetest.Result(t, out)["written"]) != 20 {
		t.Fatalf("HTTP %d %v", st, out)
	}
	if n := e.Count(`SELECT count(*) FROM predictions.filled WHERE source = 'air' AND "the site" = 'North Yard'`); n != 20 {
		t.Errorf("%d rows in predictions.filled, want 20", n)
	}
	if st, out := call(nil); st != http.StatusOK || out["status"] != "skipped" || pipelinetest.Num(pipelinetest.Result(t, out)["skipped_existing"]) != 20 {
		t.Errorf("again: HTTP %d %v, want skipped with the 20 rows found in predictions.filled", st, out)
	}
	if st, out := call(map[string]any{"window": "1d"}); st != http.StatusBadRequest || !strings.Contains(out["message"].(string), "request body must be empty") {
		t.Errorf("a body: HTTP %d %v, want 400", st, out)
	}
	conf("dry_run = true\nskip_existing = false") // read again at the next run
	if st, out := call(nil); st != http.StatusOK || out["status"] != "dry_run" {
		t.Errorf("after the edit: HTTP %d %v, want a dry run", st, out)
	}
	// Refused when it is created: a file mixed with inline arguments, one
	// outside the directory, retired parameters, a write target in a body.
	for args, want := range map[string]string{
		"config_file_path=air.toml,window=1d":             "cannot be combined",
		"config_file_path=../air.toml":                    "relative path inside",
		pipelinetest.Args("air", "gateway_url=https://x"): "is not accepted: the gateway is not a parameter",
	} {
		st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
			map[string]any{"trigger_name": "bad", "trigger_specification": "request:bad", "trigger_arguments": args})
		if st != http.StatusBadRequest || !strings.Contains(string(body), want) {
			t.Errorf("%s: HTTP %d %s, want 400 saying %q", args, st, body, want)
		}
	}
	e.CreateTrigger("open", "request:open", "model="+pipelinetest.DefaultModel())
	for _, key := range []string{"model", "output_measurement", "target_database", "config_file_path", "max_retries"} {
		st, out := e.Engine("open", map[string]any{key: "x"})
		if st != http.StatusBadRequest || !strings.Contains(out["message"].(string), "operator setting") {
			t.Errorf("%s in a body: HTTP %d %v, want 400", key, st, out)
		}
	}
}
