package main

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
	"sync/atomic"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

func TestTriggerCommands(t *testing.T) {
	e := startEnv(t)
	var out bytes.Buffer
	cli := func(args ...string) error {
		out.Reset()
		m := &Main{Stdout: &out, Stderr: &out}
		return m.Run(context.Background(), append([]string{"trigger", "--server", e.url}, args...))
	}
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1 x2,model="+defaultModel()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("create on a missing table: %v", err)
	}
	if err := cli("show", "weather"); err == nil {
		t.Fatal("a refused trigger was stored")
	}
	e.makeTable(seriesSpec{table: "w", start: t0, rows: 10})
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1 x2,model="+defaultModel()); err != nil {
		t.Fatalf("create: %v: %s", err, out.String())
	}
	if err := cli("create", "weather", "--spec", "every:15m", "--args", "measurement=w,field=y,feature_fields=x1,model="+defaultModel()); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate create: %v", err)
	}
	err := cli("create", "bad", "--spec", "every:15m", "--args", "measurement=w,field=y,min_history=0,colour=red")
	for _, want := range []string{"feature_fields", "model", "min_history", `unknown argument "colour"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad create: %v lacks %q", err, want)
		}
	}
	if err := cli("list"); err != nil || !strings.Contains(out.String(), "weather") || !strings.Contains(out.String(), "enabled") {
		t.Fatalf("list: %v %s", err, out.String())
	}
	if err := cli("disable", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("show", "weather"); err != nil || !strings.Contains(out.String(), "state:    disabled") || !strings.Contains(out.String(), "feature_fields=x1 x2") {
		t.Fatalf("show: %v %s", err, out.String())
	}
	if err := cli("enable", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("delete", "weather"); err != nil {
		t.Fatal(err)
	}
	if err := cli("show", "weather"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("show after delete: %v", err)
	}
	if err := cli("frobnicate"); err == nil || !strings.Contains(err.Error(), "unknown trigger action") {
		t.Fatalf("unknown action: %v", err)
	}
	bad := &Main{Stdout: &out, Stderr: &out}
	if err := bad.Run(context.Background(), []string{"trigger", "--server", "http://127.0.0.1:1", "list"}); err == nil || !strings.Contains(err.Error(), "cannot reach regressd") {
		t.Fatalf("unreachable server: %v", err)
	}
}

func TestDisabledTriggerRefused(t *testing.T) {
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "off", start: t0, rows: 10})
	e.createTrigger("off", "request:off", args("off", ""))
	if st, _ := e.do(http.MethodPost, "/api/v3/configure/processing_engine_trigger/disable?trigger_name=off", nil, nil); st != 200 {
		t.Fatalf("disable: HTTP %d", st)
	}
	st, out := e.engine("off", map[string]any{})
	if st != http.StatusConflict || !strings.Contains(out["message"].(string), "disabled") {
		t.Fatalf("HTTP %d %v", st, out)
	}
}

func TestSameWindowIsOneJob(t *testing.T) {
	e := startEnv(t)
	pub, err := scheduler.NewPublisher(context.Background(), e.st.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := schemas.Job{Trigger: "dup", Start: t0, End: t0.Add(time.Hour), Origin: "schedule"}
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

// fakeVendor stands in for the vendor's hosted gateway, which we cannot run:
// it answers like the real one, and fails the calls fail() picks.
func fakeVendor(t *testing.T, fail func(call int64) int) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.Header.Get("Authorization") != "Api-Key test-key" {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"error": "bad key"})
			return
		}
		if code := fail(n); code != 0 {
			w.WriteHeader(code)
			json.NewEncoder(w).Encode(map[string]string{"error": "injected"})
			return
		}
		answerLikeVendor(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestPartialKeepsEarlierBatches(t *testing.T) {
	// The second call fails for good (400): the first batch stays written.
	vendor, _ := fakeVendor(t, func(n int64) int {
		if n == 2 {
			return http.StatusBadRequest
		}
		return 0
	})
	e := startEnv(t, "--predictor", "remote", "--gateway-url", vendor.URL, "--concurrency", "1")
	e.makeTable(seriesSpec{table: "p", start: t0, rows: 100, gapEach: 5})
	e.createTrigger("p", "request:p", argsModel("p", "vendor/model-x", "predict_batch_size=10"))
	st, out := e.engine("p", window(t0, t0.Add(100*time.Hour)))
	r := result(t, out)
	if st != http.StatusOK || r["status"] != "partial" || num(r["written"]) != 10 || num(r["remaining"]) != 10 {
		t.Fatalf("HTTP %d %v, want partial with 10 written and 10 remaining", st, out)
	}
	if got := e.count(`SELECT count(*) FROM p_regressed`); got != 10 {
		t.Fatalf("rows=%d, want 10", got)
	}
	// A failed batch may be retried from the DLQ: its context stays.
	e.waitObjects(out["task_id"].(string), schemas.ContextObject(out["task_id"].(string)))
}

// Every batch refused by the gateway for the caller's reason (an unknown
// model, a refused service key) fails the run with that status, not a 5xx.
func TestAllBatchesFailingIsFailed(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden} {
		vendor, _ := fakeVendor(t, func(int64) int { return status })
		e := startEnv(t, "--predictor", "remote", "--gateway-url", vendor.URL)
		e.makeTable(seriesSpec{table: "f", start: t0, rows: 100, gapEach: 5})
		e.createTrigger("f", "request:f", argsModel("f", "vendor/model-x", "predict_batch_size=10"))
		st, out := e.engine("f", window(t0, t0.Add(100*time.Hour)))
		if st != status || out["status"] != "failed" || !strings.Contains(out["message"].(string), "2 of 2 batches failed") {
			t.Fatalf("gateway %d: HTTP %d %v, want a failed run answering %d", status, st, out, status)
		}
	}
}

func TestTransientGatewayErrorsAreRetried(t *testing.T) {
	vendor, calls := fakeVendor(t, func(n int64) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	e := startEnv(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.makeTable(seriesSpec{table: "r", start: t0, rows: 100, gapEach: 5})
	e.createTrigger("r", "request:r", argsModel("r", "vendor/model-x", ""))
	st, out := e.engine("r", window(t0, t0.Add(100*time.Hour)))
	if r := result(t, out); st != http.StatusOK || r["status"] != "success" || num(r["written"]) != 20 {
		t.Fatalf("HTTP %d %v", st, out)
	}
	if calls.Load() < 3 {
		t.Fatalf("calls=%d, want the 503s retried", calls.Load())
	}
}

func TestBearerAuthorization(t *testing.T) {
	t.Setenv("REGRESSD_AUTH_TOKENS", "tok-one, tok-two")
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "a", start: t0, rows: 10})
	e.createTriggerWith(map[string]string{"Authorization": "Bearer tok-two"}, "a", "request:a", args("a", ""))
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer nope"}, {"Authorization": "Api-Key tok-one"}} {
		st, body := e.do(http.MethodGet, "/api/v3/configure/processing_engine_trigger", h, nil)
		if st != http.StatusUnauthorized || !strings.Contains(string(body), "Bearer") {
			t.Errorf("headers %v: HTTP %d %s, want 401", h, st, body)
		}
	}
	// The engine endpoint needs both: regressd's token and the service key.
	st, body := e.do(http.MethodPost, "/api/v3/engine/a", map[string]string{"Authorization": "Bearer tok-one"}, "{}")
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
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "two", start: t0, rows: 60, gapEach: 4, tags: map[string]string{"host": "a"}})
	e.makeTable(seriesSpec{table: "two", start: t0, rows: 60, gapEach: 4, tags: map[string]string{"host": "b"}})
	// The trigger leaves the series to the request body.
	e.createTrigger("two", "request:two", "measurement=two,field=y,feature_fields=x1 x2,model="+defaultModel()+",min_history=20")
	w := window(t0, t0.Add(60*time.Hour))
	ids := map[string]bool{}
	for _, host := range []string{"a", "b"} {
		w["tags"] = map[string]string{"host": host}
		st, out := e.engine("two", w)
		if r := result(t, out); st != http.StatusOK || num(r["written"]) != 15 {
			t.Fatalf("host %s: HTTP %d %v", host, st, out)
		}
		ids[out["task_id"].(string)] = true
	}
	if len(ids) != 2 || e.count(`SELECT count(DISTINCT host) FROM two_regressed`) != 2 {
		t.Fatalf("tasks %v: two series over one window must be two jobs", ids)
	}
}

// A schedule's tick while its previous run is still under way is skipped;
// once that run ends, the next tick fires.
func TestScheduleSkipsTicksWhileARunIsUnderWay(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "test-key")
	vendor, _ := fakeVendor(t, func(int64) int { time.Sleep(2500 * time.Millisecond); return 0 })
	e := startEnv(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	now := time.Now().UTC()
	e.makeTable(seriesSpec{table: "slow", start: now.Add(-100 * time.Hour), rows: 100, gapEach: 5})
	e.createTrigger("slow", "every:1s", argsModel("slow", "vendor/model-x", "window=10d,skip_existing=false"))
	finished := func() int {
		return e.count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'slow' AND status <> 'running'`)
	}
	for deadline := time.Now().Add(60 * time.Second); finished() < 2 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if n := finished(); n < 2 {
		t.Fatalf("%d scheduled runs finished, want at least 2", n)
	}
	_, body := e.do(http.MethodGet, "/metrics", nil, nil)
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
		answerLikeVendor(w, r)
	}))
	t.Cleanup(vendor.Close)
	e := startEnv(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.makeTable(seriesSpec{table: "big", start: t0, rows: 8000, gapEach: 5})
	e.createTrigger("big", "request:big", argsModel("big", "vendor/model-x", "max_train_rows=6000"))
	st, out := e.engine("big", window(t0, t0.Add(8000*time.Hour)))
	if r := result(t, out); st != http.StatusOK || r["status"] != "success" || num(r["written"]) != 1600 {
		t.Fatalf("HTTP %d %v, want success with 1600 written", st, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(trainRows) != 2 || trainRows[0] != 6000 || trainRows[1] != 6000 {
		t.Fatalf("context rows per call %v, want 6000 in each of 2 calls", trainRows)
	}
	if logs := e.logs.String(); !regexp.MustCompile(`context loaded.* rows=6000 .*chunks=[2-9]`).MatchString(logs) {
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
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "clash", start: t0, rows: 60, gapEach: 4})
	e.createTrigger("clash", "request:clash", args("clash", ""))
	if _, err := e.pool.Exec(context.Background(), `CREATE TABLE clash_regressed (x int)`); err != nil {
		t.Fatal(err)
	}
	st, out := e.engine("clash", window(t0, t0.Add(60*time.Hour)))
	if msg, _ := out["message"].(string); st != http.StatusConflict || !strings.Contains(msg, `no column "source"`) {
		t.Fatalf("HTTP %d %v, want 409 naming the missing columns", st, out)
	}
	if _, err := e.pool.Exec(context.Background(), `DROP TABLE clash_regressed`); err != nil {
		t.Fatal(err)
	}
	st, out = e.engine("clash", window(t0, t0.Add(61*time.Hour)))
	if r := result(t, out); st != http.StatusOK || num(r["written"]) != 15 {
		t.Fatalf("after the table is dropped: HTTP %d %v", st, out)
	}

	// A shape the check cannot see: the model column too short for the
	// slug. The writer's COPY is refused; the run fails with 409 at once.
	e.makeTable(seriesSpec{table: "short", start: t0, rows: 60, gapEach: 4})
	e.createTrigger("short", "request:short", args("short", ""))
	if _, err := e.pool.Exec(context.Background(), `CREATE TABLE short_regressed ("time" timestamptz, value double precision, model varchar(3), source text, target text)`); err != nil {
		t.Fatal(err)
	}
	st, out = e.engine("short", window(t0, t0.Add(60*time.Hour)))
	if msg, _ := out["message"].(string); st != http.StatusConflict || !strings.Contains(msg, "short_regressed: the output table refused the predictions") {
		t.Fatalf("HTTP %d %v, want 409 saying the table refused the predictions", st, out)
	}
}

// Runs over overlapping windows at once (webhooks retried with a moving
// "now") fill each gap once, and their written counts add up to the rows
// filled: a prediction another run wrote meanwhile is kept, not counted.
func TestOverlappingRunsCountEachRowOnce(t *testing.T) {
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "ov", start: t0, rows: 60, gapEach: 4})
	e.createTrigger("ov", "request:ov", args("ov", ""))
	var wg sync.WaitGroup
	written := make([]int, 4)
	for i := range written {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, out := e.engine("ov", window(t0, t0.Add(time.Duration(60+i)*time.Hour)))
			if r := result(t, out); st == http.StatusOK {
				written[i] = num(r["written"])
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, w := range written {
		total += w
	}
	if n := e.count(`SELECT count(*) FROM ov_regressed`); n != 15 || total != 15 {
		t.Fatalf("%d rows filled, written %v (sum %v); want 15 and 15", n, written, total)
	}
}
