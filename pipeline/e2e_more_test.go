package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

func TestDisabledTriggerRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "off", Start: pipelinetest.T0, Rows: 10}, pipelinetest.Args("off", ""))
	if st, _ := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger/disable?trigger_name=off", nil, nil); st != 200 {
		t.Fatalf("disable: HTTP %d", st)
	}
	st, out := e.Engine("off", map[string]any{})
	if st != http.StatusConflict || !strings.Contains(out["message"].(string), "disabled") {
		t.Fatalf("HTTP %d %v", st, out)
	}
}

func TestSameWindowIsOneJob(t *testing.T) {
	e := pipelinetest.Start(t)
	pub, err := scheduler.NewPublisher(context.Background(), e.P.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := schemas.Job{Trigger: "dup", Start: pipelinetest.T0, End: pipelinetest.T0.Add(time.Hour), Origin: "schedule"}
	id1, dup1, err := pub.Publish(context.Background(), job, "")
	if err != nil {
		t.Fatal(err)
	}
	id2, dup2, err := pub.Publish(context.Background(), job, "")
	if err != nil {
		t.Fatal(err)
	}
	if id1 != id2 || dup1 || !dup2 {
		t.Fatalf("ids %s %s, duplicate flags %v %v: want one job", id1, id2, dup1, dup2)
	}
	id3, dup3, _ := pub.Publish(context.Background(), job, "rerun-1")
	if id3 == id1 || dup3 {
		t.Fatalf("a deliberate re-run must be a new job")
	}
}

func TestPartialKeepsEarlierBatches(t *testing.T) {
	// The second call fails for good (400): the first batch stays written.
	vendor, _ := pipelinetest.FakeVendor(t, func(n int64) int {
		if n == 2 {
			return http.StatusBadRequest
		}
		return 0
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL, "--concurrency", "1")
	e.Table(pipelinetest.SeriesSpec{Table: "p", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.ArgsModel("p", "vendor/model-x", "predict_batch_size=10"))
	st, out := e.Engine("p", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r := pipelinetest.Result(t, out)
	if st != http.StatusOK || r["status"] != "partial" || pipelinetest.Num(r["written"]) != 10 || pipelinetest.Num(r["remaining"]) != 10 {
		t.Fatalf("HTTP %d %v, want partial with 10 written and 10 remaining", st, out)
	}
	if got := e.Count(`SELECT count(*) FROM p_regressed`); got != 10 {
		t.Fatalf("rows=%d, want 10", got)
	}
	// A failed batch may be retried from the DLQ: its context stays.
	e.WaitObjects(out["task_id"].(string), schemas.ContextObject(out["task_id"].(string)))
}

// Every batch refused by the gateway for the caller's reason (an unknown
// model, a refused service key) fails the run with that status as its
// code, not a 5xx's.
func TestAllBatchesFailingIsFailed(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden} {
		vendor, _ := pipelinetest.FakeVendor(t, func(int64) int { return status })
		e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
		e.Table(pipelinetest.SeriesSpec{Table: "f", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.ArgsModel("f", "vendor/model-x", "predict_batch_size=10"))
		st, out := e.Engine("f", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
		if st != http.StatusOK || out["status"] != "failed" || pipelinetest.Num(out["code"]) != status || !strings.Contains(out["message"].(string), "2 of 2 batches failed") {
			t.Fatalf("gateway %d: HTTP %d %v, want a failed run (HTTP 200) with code %d", status, st, out, status)
		}
	}
}

func TestTransientGatewayErrorsAreRetried(t *testing.T) {
	vendor, calls := pipelinetest.FakeVendor(t, func(n int64) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.Table(pipelinetest.SeriesSpec{Table: "r", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.ArgsModel("r", "vendor/model-x", ""))
	st, out := e.Engine("r", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	if r := pipelinetest.Result(t, out); st != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 20 {
		t.Fatalf("HTTP %d %v", st, out)
	}
	if calls.Load() < 3 {
		t.Fatalf("calls=%d, want the 503s retried", calls.Load())
	}
}

func TestBearerAuthorization(t *testing.T) {
	t.Setenv("REGRESSD_AUTH_TOKENS", "tok-one, tok-two")
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "a", Start: pipelinetest.T0, Rows: 10})
	e.CreateTriggerWith(map[string]string{"Authorization": "Bearer tok-two"}, "a", "request:a", pipelinetest.Args("a", ""))
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer nope"}, {"Authorization": "Api-Key tok-one"}} {
		st, body := e.Do(http.MethodGet, "/api/v3/configure/processing_engine_trigger", h, nil)
		if st != http.StatusUnauthorized || !strings.Contains(string(body), "Bearer") {
			t.Errorf("headers %v: HTTP %d %s, want 401", h, st, body)
		}
	}
	// /metrics names triggers: it asks for a token too; the probes do not.
	for path, want := range map[string]int{"/metrics": http.StatusUnauthorized, "/livez": http.StatusOK, "/readyz": http.StatusOK} {
		if st, body := e.Do(http.MethodGet, path, nil, nil); st != want {
			t.Errorf("GET %s without a token: HTTP %d %s, want %d", path, st, body, want)
		}
	}
	if st, body := e.Do(http.MethodGet, "/metrics", map[string]string{"Authorization": "Bearer tok-two"}, nil); st != http.StatusOK || !strings.Contains(string(body), "regressd_") {
		t.Errorf("GET /metrics with a token: HTTP %d %.200s", st, body)
	}
	// The engine endpoint needs both: regressd's token and the service key.
	st, body := e.Do(http.MethodPost, "/api/v3/engine/a", map[string]string{"Authorization": "Bearer tok-one"}, "{}")
	if st != http.StatusUnauthorized || !strings.Contains(string(body), "X-Service-Api-Key") {
		t.Errorf("token without service key: HTTP %d %s", st, body)
	}
}

func TestNonLoopbackNeedsTokens(t *testing.T) {
	_, err := pipeline.Start(context.Background(), pipeline.Config{Roles: []pipeline.Role{pipeline.Scheduler}, HTTPAddr: "0.0.0.0:0",
		Stores: pipeline.Stores{DataDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "REGRESSD_AUTH_TOKENS") {
		t.Fatalf("err=%v", err)
	}
}

func TestTwoSeriesOneWindowAreTwoJobs(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "two", Start: pipelinetest.T0, Rows: 60, GapEach: 4, Tags: map[string]string{"host": "a"}})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "two", Start: pipelinetest.T0, Rows: 60, GapEach: 4, Tags: map[string]string{"host": "b"}})
	// The trigger leaves the series to the request body.
	e.CreateTrigger("two", "request:two", "measurement=two,field=y,feature_fields=x1 x2,model="+pipelinetest.DefaultModel()+",min_history=20")
	w := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour))
	ids := map[string]bool{}
	for _, host := range []string{"a", "b"} {
		w["tags"] = map[string]string{"host": host}
		st, out := e.Engine("two", w)
		if r := pipelinetest.Result(t, out); st != http.StatusOK || pipelinetest.Num(r["written"]) != 15 {
			t.Fatalf("host %s: HTTP %d %v", host, st, out)
		}
		ids[out["task_id"].(string)] = true
	}
	if len(ids) != 2 || e.Count(`SELECT count(DISTINCT host) FROM two_regressed`) != 2 {
		t.Fatalf("tasks %v: two series over one window must be two jobs", ids)
	}
}

// A schedule's tick while its previous run is still under way is skipped;
// once that run ends, the next tick fires.
func TestScheduleSkipsTicksWhileARunIsUnderWay(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "test-key")
	vendor, _ := pipelinetest.FakeVendor(t, func(int64) int { time.Sleep(2500 * time.Millisecond); return 0 })
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	now := time.Now().UTC()
	e.MakeTable(pipelinetest.SeriesSpec{Table: "slow", Start: now.Add(-100 * time.Hour), Rows: 100, GapEach: 5})
	e.CreateTrigger("slow", "every:1s", pipelinetest.ArgsModel("slow", "vendor/model-x", "window=10d,skip_existing=false"))
	finished := func() int {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'slow' AND status <> 'running'`)
	}
	for deadline := time.Now().Add(60 * time.Second); finished() < 2 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if n := finished(); n < 2 {
		t.Fatalf("%d scheduled runs finished, want at least 2", n)
	}
	_, body := e.Do(http.MethodGet, "/metrics", nil, nil)
	var skipped int
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "regressd_schedule_ticks_skipped_total "); ok {
			skipped, _ = strconv.Atoi(v)
		}
	}
	if skipped == 0 {
		t.Fatalf("no tick skipped while 2.5 s runs overlapped 1 s ticks:\n%s", body)
	}
}

// TestContextOfSeveralChunks: a context larger than one object-store chunk
// (128 KiB) reaches the model whole; smaller ones are read with one request.
func TestContextOfSeveralChunks(t *testing.T) {
	var mu sync.Mutex
	var trainRows []int
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			XTrain [][]float64 `json:"X_train"`
		}
		json.Unmarshal(body, &req)
		mu.Lock()
		trainRows = append(trainRows, len(req.XTrain))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		pipelinetest.AnswerLikeVendor(w, r)
	}))
	t.Cleanup(vendor.Close)
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.Table(pipelinetest.SeriesSpec{Table: "big", Start: pipelinetest.T0, Rows: 8000, GapEach: 5}, pipelinetest.ArgsModel("big", "vendor/model-x", "max_train_rows=6000"))
	st, out := e.Engine("big", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(8000*time.Hour)))
	if r := pipelinetest.Result(t, out); st != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 1600 {
		t.Fatalf("HTTP %d %v, want success with 1600 written", st, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(trainRows) != 2 || trainRows[0] != 6000 || trainRows[1] != 6000 {
		t.Fatalf("context rows per call %v, want 6000 in each of 2 calls", trainRows)
	}
	if logs := e.Logs.String(); !regexp.MustCompile(`context loaded.* rows=6000 .*chunks=[2-9]`).MatchString(logs) {
		t.Fatalf("the context was not read from several chunks:\n%s", grepLines(logs, "context loaded"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// An output table someone else made under <measurement>_regressed is
// refused at once with 409 and what is wrong with it, before the model
// runs; the run succeeds once the table is out of the way.
func TestIncompatibleOutputTableIsRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "clash", Start: pipelinetest.T0, Rows: 60, GapEach: 4}, pipelinetest.Args("clash", ""))
	if _, err := e.Pool.Exec(context.Background(), `CREATE TABLE clash_regressed (x int)`); err != nil {
		t.Fatal(err)
	}
	st, out := e.Engine("clash", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour)))
	if msg, _ := out["message"].(string); st != http.StatusOK || out["status"] != "failed" || pipelinetest.Num(out["code"]) != http.StatusConflict || !strings.Contains(msg, `no column "source"`) {
		t.Fatalf("HTTP %d %v, want a failed run (code 409) naming the missing columns", st, out)
	}
	if _, err := e.Pool.Exec(context.Background(), `DROP TABLE clash_regressed`); err != nil {
		t.Fatal(err)
	}
	st, out = e.Engine("clash", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(61*time.Hour)))
	if r := pipelinetest.Result(t, out); st != http.StatusOK || pipelinetest.Num(r["written"]) != 15 {
		t.Fatalf("after the table is dropped: HTTP %d %v", st, out)
	}

	// A shape the check cannot see: the model column too short for the
	// slug. The writer's COPY is refused; the run fails with 409 at once.
	e.Table(pipelinetest.SeriesSpec{Table: "short", Start: pipelinetest.T0, Rows: 60, GapEach: 4}, pipelinetest.Args("short", ""))
	if _, err := e.Pool.Exec(context.Background(), `CREATE TABLE short_regressed ("time" timestamptz, value double precision, model varchar(3), source text, target text)`); err != nil {
		t.Fatal(err)
	}
	st, out = e.Engine("short", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour)))
	if msg, _ := out["message"].(string); st != http.StatusOK || pipelinetest.Num(out["code"]) != http.StatusConflict || !strings.Contains(msg, "short_regressed: the output table refused the predictions") {
		t.Fatalf("HTTP %d %v, want a failed run (code 409) saying the table refused the predictions", st, out)
	}
}

// Runs over overlapping windows at once (webhooks retried with a moving
// "now") fill each gap once, and their written counts add up to the rows
// filled: a prediction another run wrote meanwhile is kept, not counted.
func TestOverlappingRunsCountEachRowOnce(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "ov", Start: pipelinetest.T0, Rows: 60, GapEach: 4}, pipelinetest.Args("ov", ""))
	var wg sync.WaitGroup
	written := make([]int, 4)
	for i := range written {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, out := e.Engine("ov", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(time.Duration(60+i)*time.Hour)))
			if r := pipelinetest.Result(t, out); st == http.StatusOK {
				written[i] = pipelinetest.Num(r["written"])
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, w := range written {
		total += w
	}
	if n := e.Count(`SELECT count(*) FROM ov_regressed`); n != 15 || total != 15 {
		t.Fatalf("%d rows filled, written %v (sum %v); want 15 and 15", n, written, total)
	}
}

// Two rows of one series at one time both to predict make one prediction,
// and the reply counts it once: written used to fall below query_rows.
func TestRowsSharingATimeArePredictedOnce(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "dup", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	if _, err := e.Pool.Exec(context.Background(), `INSERT INTO dup SELECT "time", x1 + 0.01, x2, NULL FROM dup WHERE y IS NULL`); err != nil {
		t.Fatal(err)
	}
	e.CreateTrigger("dup", "request:dup", pipelinetest.Args("dup", ""))
	st, out := e.Engine("dup", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	r := pipelinetest.Result(t, out)
	if st != http.StatusOK || r["status"] != "success" || pipelinetest.Num(r["written"]) != 20 || pipelinetest.Num(r["query_rows"]) != 20 {
		t.Fatalf("HTTP %d %v, want 20 rows to predict and 20 written", st, out)
	}
	if !strings.Contains(e.Logs.String(), "rows to predict share a time") {
		t.Error("no warning logged for the rows sharing a time")
	}
}
