package pipeline_test

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/tracing"
)

// One engine call yields one connected trace: the scheduler's root span,
// the producer's plan, one worker span and one writer span per batch, each
// the child of the span whose message it received (W3C traceparent in the
// NATS headers, through real JetStream).
func TestOneTaskOneTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	e := pipelinetest.StartWith(t, func(c *pipeline.Config) { c.Tracing = tracing.WithProvider(tp) })
	e.MakeTable(pipelinetest.SeriesSpec{Table: "tr", Start: pipelinetest.T0, Rows: 120, GapEach: 10})
	e.CreateTrigger("tr", "request:tr", pipelinetest.Args("tr", "predict_batch_size=5"))
	status, out := e.Engine("tr", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(120*time.Hour)))
	if status != http.StatusOK || out["status"] != "success" {
		t.Fatalf("HTTP %d: %v", status, out)
	}
	const batches = 3 // 12 gaps, 5 a batch
	count := func(name string) int {
		n := 0
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				n++
			}
		}
		return n
	}
	// The writer's span ends after the summary the engine call waited for.
	pipelinetest.WaitUntil(t, 10*time.Second, func() bool { return count("writer write") == batches }, "the writer's spans")
	spans := exp.GetSpans()
	for name, want := range map[string]int{"regressd.task": 1, "producer plan": 1, "worker predict": batches, "writer write": batches} {
		if got := count(name); got != want {
			t.Errorf("%d spans %q, want %d", got, name, want)
		}
	}
	ids := map[trace.SpanID]string{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = s.Name
	}
	parentOf := map[string]string{"producer plan": "regressd.task", "worker predict": "producer plan", "writer write": "worker predict"}
	root := spans[0].SpanContext.TraceID()
	for _, s := range spans {
		if s.SpanContext.TraceID() != root {
			t.Errorf("span %q in trace %s, the task's is %s", s.Name, s.SpanContext.TraceID(), root)
		}
		if s.Name == "regressd.task" {
			if s.Parent.IsValid() {
				t.Errorf("the task's root span has a parent %s", s.Parent.SpanID())
			}
			continue
		}
		if got := ids[s.Parent.SpanID()]; got != parentOf[s.Name] || !s.Parent.IsRemote() {
			t.Errorf("span %q's parent is %q (remote %v), want %q received from the bus", s.Name, got, s.Parent.IsRemote(), parentOf[s.Name])
		}
	}
	if t.Failed() {
		for _, s := range spans {
			t.Logf("%s %s parent %s", s.Name, s.SpanContext.SpanID(), s.Parent.SpanID())
		}
	}
}

// After a real run (webhook, on JetStream and PostgreSQL), /metrics serves
// every regressd_* metric the dashboard and the alerts name, and the
// pipeline's counters and histograms hold the run.
func TestMetricsServedAfterARun(t *testing.T) {
	e := startWithGateway(t)
	predictOnGateway(t, e)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "mx", Start: pipelinetest.T0, Rows: 120, GapEach: 10})
	e.CreateTrigger("mx", "request:mx", pipelinetest.Args("mx", "predict_batch_size=5"))
	// A scheduled trigger (next tick in an hour) serves its schedule's series.
	e.CreateTrigger("mx_hourly", "every:1h", pipelinetest.Args("mx", ""))
	status, out := e.Engine("mx", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(120*time.Hour)))
	if status != http.StatusOK || out["status"] != "success" {
		t.Fatalf("HTTP %d: %v", status, out)
	}
	var body string
	pipelinetest.WaitUntil(t, 10*time.Second, func() bool {
		_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
		body = string(b)
		return value(body, `regressd_tasks_total{status="success"}`) == 1 &&
			value(body, `regressd_schedule_period_seconds{trigger="mx_hourly"}`) == 3600
	}, "the task counted and the schedule served")

	var named, selectors []string
	for _, f := range []string{"../ops/grafana/regressd.json", "../ops/prometheus/alerts.yml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), `\"`, `"`)
		for _, sel := range regexp.MustCompile(`\bregressd_[a-z_]+\{[^}]*\}`).FindAllString(text, -1) {
			if !slices.Contains(selectors, sel) {
				selectors = append(selectors, sel)
			}
		}
		for _, n := range regexp.MustCompile(`\bregressd_[a-z_]+`).FindAllString(string(raw), -1) {
			if !slices.Contains(named, n) {
				named = append(named, n)
			}
		}
	}
	if len(named) < 20 {
		t.Fatalf("the dashboard and alerts name %d metrics: not read", len(named))
	}
	for _, n := range named {
		if !regexp.MustCompile(`(?m)^` + n + `[{ ]`).MatchString(body) {
			t.Errorf("%s is named by the dashboard or the alerts but not served", n)
		}
	}
	// Their selectors' label values (stream="REGRESS_DLQ", state="open") are
	// served too: a query on a value never served would show nothing.
	for _, sel := range selectors {
		name, matchers, _ := strings.Cut(strings.TrimSuffix(sel, "}"), "{")
		found := false
		for line := range strings.SplitSeq(body, "\n") {
			if !strings.HasPrefix(line, name+"{") {
				continue
			}
			all := true
			for _, m := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(matchers, -1) {
				all = all && strings.Contains(line, m[1]+`="`+m[2]+`"`)
			}
			if all {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no served series matches %s", sel)
		}
	}
	for series, want := range map[string]float64{
		`regressd_rows_written_total`:                                                    12,
		`regressd_rows_predicted_total`:                                                  12,
		`regressd_rows_read_total`:                                                       120,
		`regressd_task_duration_seconds_count`:                                           1,
		`regressd_stage_duration_seconds_count{stage="producer_read"}`:                   1,
		`regressd_stage_duration_seconds_count{stage="engine_fit"}`:                      2, // the worker's one context, and the gateway's call
		`regressd_stage_duration_seconds_count{stage="engine_predict"}`:                  4, // 3 batches, and the gateway's call
		`regressd_engine_inflight_calls`:                                                 0,
		`regressd_breaker_state{state="closed"}`:                                         1,
		`regressd_consumer_pending_messages{consumer="worker",stream="REGRESS_BATCHES"}`: 0,
		`regressd_dead_letters_total{reason="permanent",stream="REGRESS_JOBS"}`:          0,
	} {
		if got := value(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := value(body, `regressd_stage_duration_seconds_count{stage="writer_commit"}`); got < 1 {
		t.Errorf("writer_commit observed %v times, want at least 1", got)
	}
	if got := value(body, `regressd_http_requests_total{code="200",server="api"}`); got < 1 {
		t.Errorf("api requests answered 200: %v, want at least 1", got)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
	series := 0
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "regressd_") {
			series++
		}
	}
	t.Logf("scrape: %d bytes, %d regressd_* series lines", len(body), series)
}

// value reads one series' value from a scrape in the text format; -1 when
// it is not served.
func value(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// A worker predicting through a hosted gateway counts every call by its
// outcome, and the retry a failed call caused.
func TestGatewayCallsCountedByOutcome(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "test-key")
	vendor, calls := pipelinetest.FakeVendor(t, func(n int64) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return 0
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "gw", Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	e.CreateTrigger("gw", "request:gw", pipelinetest.ArgsModel("gw", "vendor/model-x", ""))
	status, out := e.Engine("gw", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour)))
	if status != http.StatusOK || out["status"] != "success" {
		t.Fatalf("HTTP %d: %v", status, out)
	}
	_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
	body := string(b)
	for series, want := range map[string]float64{
		`regressd_gateway_calls_total{outcome="server_error"}`:   1,
		`regressd_gateway_calls_total{outcome="success"}`:        float64(calls.Load() - 1),
		`regressd_gateway_retries_total{outcome="server_error"}`: 1,
		`regressd_gateway_retries_total{outcome="success"}`:      0,
	} {
		if got := value(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// An engine call that carries a W3C traceparent puts its task in the
// caller's trace: the task's root span is the caller's span's child.
func TestEngineCallJoinsCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	e := pipelinetest.StartWith(t, func(c *pipeline.Config) { c.Tracing = tracing.WithProvider(tp) })
	e.MakeTable(pipelinetest.SeriesSpec{Table: "tc", Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	e.CreateTrigger("tc", "request:tc", pipelinetest.Args("tc", ""))
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	status, raw := e.Do(http.MethodPost, "/api/v3/engine/tc", map[string]string{"X-Service-Api-Key": "test-key",
		"Traceparent": "00-" + traceID + "-" + parentID + "-01"}, pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(60*time.Hour)))
	if status != http.StatusOK {
		t.Fatalf("HTTP %d: %s", status, raw)
	}
	pipelinetest.WaitUntil(t, 10*time.Second, func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == "writer write" {
				return true
			}
		}
		return false
	}, "the writer's span")
	for _, s := range exp.GetSpans() {
		if got := s.SpanContext.TraceID().String(); got != traceID {
			t.Errorf("span %q in trace %s, want the caller's %s", s.Name, got, traceID)
		}
		if s.Name == "regressd.task" && s.Parent.SpanID().String() != parentID {
			t.Errorf("the task's span has parent %s, want the caller's %s", s.Parent.SpanID(), parentID)
		}
	}
}

// A scheduled run is counted as a tick and, once it ended, as the
// trigger's last success; the trigger's period is served.
func TestScheduledRunRecorded(t *testing.T) {
	e := pipelinetest.Start(t)
	loaded := time.Now()
	e.MakeTable(pipelinetest.SeriesSpec{Table: "sr", Start: loaded.Add(-60 * time.Hour), Rows: 60, GapEach: 10})
	e.CreateTrigger("sr", "every:1s", pipelinetest.Args("sr", "window=10d,skip_existing=false"))
	// Until a run succeeds, the last success reads the time the schedule
	// was loaded; a run's success moves it to that run's tick.
	const last = `regressd_schedule_last_success_timestamp_seconds{trigger="sr"}`
	var body string
	var since float64
	pipelinetest.WaitUntil(t, 10*time.Second, func() bool {
		_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
		since = value(string(b), last)
		return since > 0
	}, "the schedule served")
	if since < float64(loaded.Unix()) {
		t.Fatalf("last success %v before any run, want the load time (after %d)", since, loaded.Unix())
	}
	pipelinetest.WaitUntil(t, 60*time.Second, func() bool {
		_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
		body = string(b)
		return value(body, last) > since
	}, "a scheduled run's success")
	if got := value(body, `regressd_schedule_period_seconds{trigger="sr"}`); got != 1 {
		t.Errorf("period = %v, want 1", got)
	}
	if got := value(body, `regressd_schedule_ticks_total`); got < 1 {
		t.Errorf("ticks = %v, want at least 1", got)
	}
	if got := value(body, `regressd_tasks_total{status="success"}`); got < 1 {
		t.Errorf("tasks succeeded = %v, want at least 1", got)
	}
	// Deleting the trigger drops its schedule's series.
	if st, b := e.Do(http.MethodDelete, "/api/v3/configure/processing_engine_trigger/sr", nil, nil); st >= 300 {
		t.Fatalf("delete HTTP %d: %s", st, b)
	}
	pipelinetest.WaitUntil(t, 10*time.Second, func() bool {
		_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
		return !strings.Contains(string(b), `trigger="sr"`)
	}, "the deleted trigger's series gone")
}

// The gateway role's /predict is counted by status code and its engine's
// fit, prediction and KV-cache rung recorded, on the process's /metrics.
func TestGatewayRoleRecordsItsEngine(t *testing.T) {
	e := startWithGateway(t)
	predictOnGateway(t, e)
	_, b := e.Do(http.MethodGet, "/metrics", nil, nil)
	body := string(b)
	for series, want := range map[string]float64{
		`regressd_http_requests_total{code="200",server="gateway"}`:     1,
		`regressd_stage_duration_seconds_count{stage="engine_fit"}`:     1,
		`regressd_stage_duration_seconds_count{stage="engine_predict"}`: 1,
		`regressd_engine_inflight_calls`:                                0,
	} {
		if got := value(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	rungs := 0.0
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "regressd_engine_calls_total{") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			rungs += f
		}
	}
	if rungs != 1 {
		t.Errorf("engine calls by rung sum to %v, want 1", rungs)
	}
}

// startWithGateway runs every role, the gateway's on a port of its own,
// as 'regressd run' does.
func startWithGateway(t *testing.T) *pipelinetest.Env {
	return pipelinetest.StartWith(t, func(c *pipeline.Config) {
		c.Roles = append(c.Roles, pipeline.Gateway)
		c.GatewayAddr = "127.0.0.1:0"
	})
}

// predictOnGateway makes one /predict call to e's gateway with a new key.
func predictOnGateway(t *testing.T, e *pipelinetest.Env) {
	t.Helper()
	key, _, err := gateway.NewKeyStore(e.Pool).Create(t.Context(), "observe")
	if err != nil {
		t.Fatal(err)
	}
	c, err := gateway.NewClient(e.P.GatewayURL(), key, pipelinetest.DefaultModel())
	if err != nil {
		t.Fatal(err)
	}
	X := [][]float64{{1, 2}, {2, 1}, {3, 5}, {4, 2}, {5, 5}, {6, 1}}
	y := []float64{0, 3, 1, 6, 5, 11}
	if _, err := c.Predict(t.Context(), X, y, [][]float64{{7, 3}}, nil); err != nil {
		t.Fatal(err)
	}
}
