package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

func TestWebhookWritesPredictions(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "m1", Start: pipelinetest.T0, Rows: 300, GapEach: 10, Tags: map[string]string{"host": "a"}})
	before := e.SourceChecksum("m1")
	e.CreateTrigger("m1", "request:m1", pipelinetest.Args("m1", "predict_batch_size=7"))

	status, out := e.Engine("m1", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(300*time.Hour)))
	if status != http.StatusOK || out["status"] != "success" || out["task_id"] == "" {
		t.Fatalf("HTTP %d: %v", status, out)
	}
	r := pipelinetest.Result(t, out)
	if got, want := r["status"], "success"; got != want {
		t.Fatalf("result status=%v, want %v (%v)", got, want, r)
	}
	if got, want := pipelinetest.Num(r["written"]), 30; got != want {
		t.Fatalf("written=%d, want %d", got, want)
	}
	if got := e.Count(`SELECT count(*) FROM m1_regressed WHERE source = 'm1' AND target = 'y' AND host = 'a' AND model = $1 AND value = value`, pipelinetest.DefaultModel()); got != 30 {
		t.Fatalf("rows in m1_regressed=%d, want 30", got)
	}
	// One point per predicted row, at that row's timestamp.
	if got := e.Count(`SELECT count(*) FROM m1_regressed r JOIN m1 s ON s."time" = r."time" WHERE s.y IS NULL`); got != 30 {
		t.Fatalf("predictions at gap timestamps=%d, want 30", got)
	}
	if after := e.SourceChecksum("m1"); after != before {
		t.Fatal("the source table changed")
	}
	// The task is visible by id.
	tid := out["task_id"].(string)
	st, body := e.Do(http.MethodGet, "/api/v3/engine/m1/tasks/"+tid, nil, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"batches": 5`) {
		t.Fatalf("task lookup HTTP %d: %s", st, body)
	}
	// Every batch written: the task's plan and context are forgotten.
	e.WaitObjects(tid)
	// Once the live summary has expired, the task endpoint reads the ledger.
	kv, err := e.P.JS.KeyValue(context.Background(), schemas.BucketTasks)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(context.Background(), tid); err != nil {
		t.Fatal(err)
	}
	st, body = e.Do(http.MethodGet, "/api/v3/engine/m1/tasks/"+tid, nil, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"batches": 5`) || !strings.Contains(string(body), `"written": 30`) {
		t.Fatalf("task lookup from the ledger: HTTP %d: %s", st, body)
	}

	// skip_existing: a second run over more of the window pays for nothing twice.
	status, out = e.Engine("m1", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(301*time.Hour)))
	r = pipelinetest.Result(t, out)
	if status != http.StatusOK || r["status"] != "skipped" || !strings.Contains(r["message"].(string), "already have a prediction") {
		t.Fatalf("second run: HTTP %d %v", status, out)
	}
	if got := e.Count(`SELECT count(*) FROM m1_regressed`); got != 30 {
		t.Fatalf("rows after second run=%d, want 30", got)
	}
}

func TestDryRunAndReplace(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "m2", Start: pipelinetest.T0, Rows: 200, GapEach: 20}, pipelinetest.Args("m2", "skip_existing=false"))

	body := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(200*time.Hour))
	body["dry_run"] = true
	status, out := e.Engine("m2", body)
	r := pipelinetest.Result(t, out)
	if status != http.StatusOK || r["status"] != "dry_run" {
		t.Fatalf("dry run: HTTP %d %v", status, out)
	}
	preds, _ := r["predictions"].([]any)
	if len(preds) != 10 || pipelinetest.Num(r["written"]) != 0 {
		t.Fatalf("dry run returned %d predictions, written %v; want 10 and 0", len(preds), r["written"])
	}
	if n := e.Count(`SELECT count(*) FROM pg_tables WHERE tablename = 'm2_regressed'`); n != 0 {
		t.Fatal("dry run created the output table")
	}

	for i := 0; i < 2; i++ { // skip_existing=false: predicted again, replaced, never doubled
		status, out = e.Engine("m2", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(time.Duration(200+i)*time.Hour)))
		if r := pipelinetest.Result(t, out); status != http.StatusOK || pipelinetest.Num(r["written"]) != 10 {
			t.Fatalf("run %d: HTTP %d %v", i, status, out)
		}
	}
	if got := e.Count(`SELECT count(*) FROM m2_regressed`); got != 10 {
		t.Fatalf("rows=%d, want 10", got)
	}
}

func TestEngineEndpointRefusals(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "m3", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.Args("m3", ""))
	w := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))

	st, body := e.Do(http.MethodPost, "/api/v3/engine/m3", nil, w)
	if st != http.StatusUnauthorized || !strings.Contains(string(body), "X-Service-Api-Key") {
		t.Fatalf("no key: HTTP %d %s", st, body)
	}
	st, body = e.Do(http.MethodPost, "/api/v3/engine/m3", map[string]string{"Authorization": "Api-Key k"}, w)
	if st != http.StatusUnauthorized || !strings.Contains(string(body), "Authorization header is regressd's own") {
		t.Fatalf("Authorization only: HTTP %d %s", st, body)
	}
	cases := []struct {
		name    string
		trigger string
		body    any
		status  int
		want    string
	}{
		{"unknown trigger", "nope", w, 404, "no request trigger"},
		{"unknown body key", "m3", map[string]any{"colour": 1}, 400, `unknown body key "colour"`},
		{"pinned key", "m3", map[string]any{"field": "x1"}, 400, "set by the trigger"},
		{"start after end", "m3", pipelinetest.Window(pipelinetest.T0.Add(time.Hour), pipelinetest.T0), 400, "not before"},
		{"not json", "m3", "{", 400, "the body is not valid JSON: unexpected end of JSON input (at offset 1)"},
	}
	for _, tc := range cases {
		st, out := e.Engine(tc.trigger, tc.body)
		if st != tc.status || out["status"] != "failed" || !strings.Contains(out["message"].(string), tc.want) {
			t.Errorf("%s: HTTP %d %v, want %d with %q", tc.name, st, out, tc.status, tc.want)
		}
	}
	big := bytes.Repeat([]byte(" "), 10<<20+10)
	if st, _ := e.Do(http.MethodPost, "/api/v3/engine/m3", map[string]string{"X-Service-Api-Key": "k"}, big); st != http.StatusRequestEntityTooLarge {
		t.Errorf("11 MiB body: HTTP %d, want 413", st)
	}
}

func TestRunRulesBeforeTheModel(t *testing.T) {
	e := pipelinetest.Start(t)
	ctx := context.Background()
	e.MakeTable(pipelinetest.SeriesSpec{Table: "multi", Start: pipelinetest.T0, Rows: 60, GapEach: 4, Tags: map[string]string{"host": "a"}})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "multi", Start: pipelinetest.T0, Rows: 60, GapEach: 4, Tags: map[string]string{"host": "b"}})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "few", Start: pipelinetest.T0, Rows: 30, GapEach: 2})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "full", Start: pipelinetest.T0, Rows: 60})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "big", Start: pipelinetest.T0, Rows: 500, GapEach: 10})
	// These three are fine when their triggers are created and spoilt after,
	// so the run's own schema check is what refuses them.
	for _, name := range []string{"texty", "clash", "missing"} {
		e.MakeTable(pipelinetest.SeriesSpec{Table: name, Start: pipelinetest.T0, Rows: 10})
	}
	for _, tr := range []struct{ name, extra string }{
		{"multi", ""}, {"multi_one", "tags=host:b"}, {"few", ""}, {"full", ""}, {"big", "max_read_rows=200"},
		{"texty", ""}, {"clash", ""}, {"missing", ""},
	} {
		table := map[string]string{"multi_one": "multi", "badtag": "full"}[tr.name]
		if table == "" {
			table = tr.name
		}
		e.CreateTrigger(tr.name, "request:"+tr.name, pipelinetest.Args(table, tr.extra))
	}
	if _, err := e.Pool.Exec(ctx, `ALTER TABLE texty ALTER COLUMN x1 TYPE text, ALTER COLUMN x2 TYPE text; ALTER TABLE clash ADD COLUMN source text; DROP TABLE missing`); err != nil {
		t.Fatal(err)
	}
	w := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(1000*time.Hour))
	// Every run answers HTTP 200 with its status at the top level; a
	// failed one says in code what an HTTP status would have said.
	cases := []struct {
		trigger string
		code    int // a failed run's code
		result  string
		want    []string
	}{
		{"multi", 400, "failed", []string{"2 series", "host=a", "host=b", "tags"}},
		{"multi_one", 0, "success", nil},
		{"few", 0, "skipped", []string{"fewer than min_history=20"}},
		{"full", 0, "skipped", []string{"no rows to predict"}},
		{"big", 0, "success", nil},
		{"texty", 400, "failed", []string{`feature "x1" is of type text, not numeric: encode it as a number first or choose a numeric column; feature "x2" is of type text`}},
		{"clash", 400, "failed", []string{`"source" collides`}},
		{"missing", 404, "failed", []string{`"missing" does not exist`}},
	}
	for _, tc := range cases {
		st, out := e.Engine(tc.trigger, w)
		if st != http.StatusOK || pipelinetest.Num(out["code"]) != tc.code {
			t.Errorf("%s: HTTP %d %v, want 200 with code %d", tc.trigger, st, out, tc.code)
			continue
		}
		r := pipelinetest.Result(t, out)
		msg, _ := r["message"].(string)
		if out["status"] != tc.result || r["status"] != tc.result {
			t.Errorf("%s: status %v, want %s (%v)", tc.trigger, out["status"], tc.result, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %q lacks %q", tc.trigger, msg, w)
			}
		}
		if tc.trigger == "big" {
			if r["read_truncated"] != true || pipelinetest.Num(r["read_rows"]) != 200 || pipelinetest.Num(r["written"]) != 20 {
				t.Errorf("big: %v, want the newest 200 rows read, cut flagged, 20 written", r)
			}
		}
	}
	if n := e.Count(`SELECT count(*) FROM pg_tables WHERE tablename IN ('few_regressed', 'texty_regressed', 'clash_regressed', 'full_regressed')`); n != 0 {
		t.Errorf("%d output tables created by runs that must not call the model", n)
	}
}

func TestScheduleWritesEachRowOnce(t *testing.T) {
	e := pipelinetest.Start(t)
	now := time.Now().UTC()
	e.MakeTable(pipelinetest.SeriesSpec{Table: "sched", Start: now.Add(-100 * time.Hour), Rows: 100, GapEach: 5})
	e.CreateTrigger("sched", "every:1s", pipelinetest.Args("sched", "window=10d"))
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'sched' AND status <> 'running'`) >= 3 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'sched' AND status <> 'running'`); n < 3 {
		t.Fatalf("only %d scheduled runs finished", n)
	}
	if got := e.Count(`SELECT count(*) FROM sched_regressed`); got != 20 {
		t.Fatalf("rows=%d, want 20 (each gap once)", got)
	}
	if got := e.Count(`SELECT count(DISTINCT "time") FROM sched_regressed`); got != 20 {
		t.Fatalf("distinct times=%d, want 20", got)
	}
	if got := e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'sched' AND status = 'success'`); got != 1 {
		t.Fatalf("%d runs wrote; want exactly 1 (the rest skipped)", got)
	}
}

func TestServiceKeyNeverStored(t *testing.T) {
	const key = "KEY-canary-7f3e9b1d5c"
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "k", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.Args("k", ""))
	st, body := e.Do(http.MethodPost, "/api/v3/engine/k", map[string]string{"X-Service-Api-Key": key}, pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	if st != http.StatusOK {
		t.Fatalf("HTTP %d %s", st, body)
	}
	if strings.Contains(e.Logs.String(), key) {
		t.Error("the key appears in the logs")
	}
	if n := e.Count(`SELECT count(*) FROM (
		SELECT row_to_json(t)::text AS j FROM regressd_tasks t UNION ALL
		SELECT row_to_json(b)::text FROM regressd_task_batches b UNION ALL
		SELECT row_to_json(r)::text FROM k_regressed r) x WHERE j LIKE '%' || $1 || '%'`, key); n != 0 {
		t.Errorf("the key appears in %d database rows", n)
	}
	e.Stop() // flush the stream store to disk
	found := ""
	filepath.WalkDir(filepath.Join(e.DataDir, "nats"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(key)) {
				found = p
			}
		}
		return nil
	})
	if found != "" {
		t.Errorf("the key is stored in plain text in %s", found)
	}
}

func TestTriggerCreateChecksTheTable(t *testing.T) {
	e := pipelinetest.Start(t)
	ctx := context.Background()
	e.MakeTable(pipelinetest.SeriesSpec{Table: "ok", Start: pipelinetest.T0, Rows: 10})
	if _, err := e.Pool.Exec(ctx, `CREATE TABLE texty ("time" timestamptz, y double precision, x1 text, x2 double precision);
		CREATE TABLE clash ("time" timestamptz, y double precision, x1 double precision, x2 double precision, source text)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, args, want string }{
		{"missing", pipelinetest.Args("nope", ""), `"nope" does not exist`},
		{"texty", pipelinetest.Args("texty", ""), `feature "x1" is of type text`},
		{"clash", pipelinetest.Args("clash", ""), `"source" collides`},
		{"badtag", pipelinetest.Args("ok", "tags=zone:x"), `tag "zone"`},
		{"badgroup", pipelinetest.Args("ok", "group_by=nosuch"), `group_by: "nosuch" is not a tag column of "ok"`},
		{"nofield", pipelinetest.ArgsModel("ok", pipelinetest.DefaultModel(), "") + ",field=zz", `given twice`},
	}
	for _, tc := range cases {
		st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
			map[string]any{"trigger_name": tc.name, "trigger_specification": "every:1h", "trigger_arguments": tc.args})
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if st != http.StatusBadRequest || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s: HTTP %d %s, want 400 with %q", tc.name, st, body, tc.want)
		}
	}
	// A request trigger may leave the field to the body; the table is still checked.
	e.CreateTrigger("partial", "request:partial", "measurement=ok,model="+pipelinetest.DefaultModel())
	st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
		map[string]any{"trigger_name": "partial2", "trigger_specification": "request:partial2", "trigger_arguments": "measurement=nope,model=" + pipelinetest.DefaultModel()})
	if st != http.StatusBadRequest || !strings.Contains(string(body), "does not exist") {
		t.Errorf("partial trigger on a missing table: HTTP %d %s", st, body)
	}
}
