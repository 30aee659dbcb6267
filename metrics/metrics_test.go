package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// sample reads a series of name from m's registry: a counter's or gauge's
// value, or a histogram's observation count. ok is false when m serves no
// such series.
func sample(t *testing.T, m *Metrics, name string, labels map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range s.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, want := range labels {
				if have[k] != want {
					continue series
				}
			}
			return value(s), true
		}
	}
	return 0, false
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

func mustSample(t *testing.T, m *Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := sample(t, m, name, labels)
	if !ok {
		t.Fatalf("%s%v is not served", name, labels)
	}
	return v
}

func TestRecordsLandInTheirSeries(t *testing.T) {
	m := New()
	m.ObserveTask("success", 3*time.Second)
	m.ObserveTask("partial", time.Second)
	m.ObserveStage(StageWriterCommit, 20*time.Millisecond)
	m.Time(StageProducerRead)()
	m.AddRows(RowsRead, 100)
	m.AddRows(RowsPredicted, 10)
	m.AddRows(RowsWritten, 9)
	m.AddRows(RowsSkippedExisting, 1)
	m.AddRows(RowsWritten, -5) // ignored: counters only grow
	m.GatewayCall(OutcomeSuccess)
	m.GatewayCall(OutcomeOfStatus(503))
	m.GatewayRetry(OutcomeOfStatus(503))
	m.DeadLetter("REGRESS_BATCHES", ReasonSchemaVersion)

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{NameTasks, map[string]string{"status": "success"}, 1},
		{NameTasks, map[string]string{"status": "partial"}, 1},
		{NameTasks, map[string]string{"status": "failed"}, 0},
		{NameTaskDuration, nil, 2},
		{NameStageDuration, map[string]string{"stage": "writer_commit"}, 1},
		{NameStageDuration, map[string]string{"stage": "producer_read"}, 1},
		{NameStageDuration, map[string]string{"stage": "engine_fit"}, 0},
		{NameRowsRead, nil, 100},
		{NameRowsPredicted, nil, 10},
		{NameRowsWritten, nil, 9},
		{NameRowsSkippedExisting, nil, 1},
		{NameGatewayCalls, map[string]string{"outcome": "success"}, 1},
		{NameGatewayCalls, map[string]string{"outcome": "server_error"}, 1},
		{NameGatewayRetries, map[string]string{"outcome": "server_error"}, 1},
		{NameGatewayRetries, map[string]string{"outcome": "rate_limited"}, 0},
		{NameDeadLetters, map[string]string{"stream": "REGRESS_BATCHES", "reason": "schema_version"}, 1},
		{NameDeadLetters, map[string]string{"stream": "REGRESS_JOBS", "reason": "panic"}, 0},
	} {
		if got := mustSample(t, m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The task's duration lands in the bucket that holds 3 s.
	h := m.taskDuration
	if got := testutil.CollectAndCount(h); got != 1 {
		t.Fatalf("task histogram has %d series, want 1", got)
	}
}

func TestOutcomeOfStatus(t *testing.T) {
	for code, want := range map[int]Outcome{200: OutcomeSuccess, 204: OutcomeSuccess, 400: OutcomeClientError,
		401: OutcomeClientError, 413: OutcomeClientError, 429: OutcomeRateLimited, 500: OutcomeServerError, 503: OutcomeServerError} {
		if got := OutcomeOfStatus(code); got != want {
			t.Errorf("OutcomeOfStatus(%d) = %s, want %s", code, got, want)
		}
	}
}

// A value outside a label's set, such as a task id passed by mistake, is
// counted under "other" and never becomes a series of its own.
func TestLabelsStayBounded(t *testing.T) {
	m := New()
	before := testutil.CollectAndCount(m.tasks) + testutil.CollectAndCount(m.deadLetters) +
		testutil.CollectAndCount(m.gatewayCalls) + testutil.CollectAndCount(m.stageDuration)
	for i := range 50 {
		id := fmt.Sprintf("t_%040d", i)
		m.ObserveTask(id, time.Second)
		m.DeadLetter(id, Reason(id))
		m.GatewayCall(Outcome(id))
		m.ObserveStage(Stage(id), time.Second)
		m.ObserveRung(id)
	}
	after := testutil.CollectAndCount(m.tasks) + testutil.CollectAndCount(m.deadLetters) +
		testutil.CollectAndCount(m.gatewayCalls) + testutil.CollectAndCount(m.stageDuration)
	// One "other" series per metric (the dead letters': one per stream and reason pair, both other).
	if got, want := after-before, 4; got != want {
		t.Fatalf("%d new series after 50 odd label values, want %d", got, want)
	}
	if got := mustSample(t, m, NameTasks, map[string]string{"status": Other}); got != 50 {
		t.Fatalf("tasks{status=other} = %v, want 50", got)
	}
	if got := mustSample(t, m, NameEngineRung, map[string]string{"rung": Other}); got != 1 {
		t.Fatalf("rung{other} = %v, want 1", got)
	}
}

func TestEngineRungAndInflight(t *testing.T) {
	m := New()
	done1, done2 := m.EngineCall(), m.EngineCall()
	if got := mustSample(t, m, NameEngineInflight, nil); got != 2 {
		t.Fatalf("in flight = %v, want 2", got)
	}
	done1()
	done2()
	if got := mustSample(t, m, NameEngineInflight, nil); got != 0 {
		t.Fatalf("in flight = %v after both ended, want 0", got)
	}
	m.ObserveRung("bogus")
	m.ObserveRung("resident_bf16")
	m.ObserveRung("plain_loop")
	for _, c := range []struct {
		rung        string
		last, calls float64
	}{{"plain_loop", 1, 1}, {"resident_bf16", 0, 1}, {"no_cache", 0, 0}, {Other, -1, 1}} {
		if c.last >= 0 {
			if got := mustSample(t, m, NameEngineRung, map[string]string{"rung": c.rung}); got != c.last {
				t.Errorf("kv_cache_rung{%s} = %v, want %v", c.rung, got, c.last)
			}
		}
		if got := mustSample(t, m, NameEngineRungCalls, map[string]string{"rung": c.rung}); got != c.calls {
			t.Errorf("engine_calls{%s} = %v, want %v", c.rung, got, c.calls)
		}
	}
	if _, ok := sample(t, m, NameEngineRung, map[string]string{"rung": Other}); ok {
		t.Error("rung{other} still served after a known rung was used")
	}
}

func TestSchedules(t *testing.T) {
	m := New()
	loaded := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SetSchedule("hourly", time.Hour, loaded)
	m.ScheduleTick(false)
	m.ScheduleTick(true)
	if got := mustSample(t, m, NameScheduleSuccess, map[string]string{"trigger": "hourly"}); got != float64(loaded.Unix()) {
		t.Fatalf("last success = %v before any run, want the load time %d", got, loaded.Unix())
	}
	if got := mustSample(t, m, NameSchedulePeriod, map[string]string{"trigger": "hourly"}); got != 3600 {
		t.Fatalf("period = %v, want 3600", got)
	}
	ok1, ok2 := loaded.Add(2*time.Hour), loaded.Add(time.Hour)
	m.ScheduleSucceeded("hourly", ok1)
	m.ScheduleSucceeded("hourly", ok2) // finished later, started earlier: not a newer success
	m.SetSchedule("hourly", 2*time.Hour, loaded.Add(3*time.Hour))
	if got := mustSample(t, m, NameScheduleSuccess, map[string]string{"trigger": "hourly"}); got != float64(ok1.Unix()) {
		t.Fatalf("last success = %v, want %d", got, ok1.Unix())
	}
	if got := mustSample(t, m, NameSchedulePeriod, map[string]string{"trigger": "hourly"}); got != 7200 {
		t.Fatalf("period = %v after a change, want 7200", got)
	}
	if a, b := mustSample(t, m, NameScheduleTicks, nil), mustSample(t, m, NameScheduleSkipped, nil); a != 1 || b != 1 {
		t.Fatalf("ticks fired %v skipped %v, want 1 and 1", a, b)
	}
	m.ForgetSchedule("hourly")
	if _, ok := sample(t, m, NameScheduleSuccess, map[string]string{"trigger": "hourly"}); ok {
		t.Fatal("a forgotten schedule is still served")
	}
}

func TestInstrumentHandler(t *testing.T) {
	m := New()
	h := m.InstrumentHandler(ServerGateway, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/boom" {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	}))
	for _, p := range []string{"/predict", "/predict", "/boom"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", p, nil))
	}
	if got := mustSample(t, m, NameHTTPRequests, map[string]string{"server": "gateway", "code": "200"}); got != 2 {
		t.Errorf("requests{200} = %v, want 2", got)
	}
	if got := mustSample(t, m, NameHTTPRequests, map[string]string{"server": "gateway", "code": "503"}); got != 1 {
		t.Errorf("requests{503} = %v, want 1", got)
	}
	if got := mustSample(t, m, NameHTTPDuration, map[string]string{"server": "gateway"}); got != 3 {
		t.Errorf("durations = %v, want 3", got)
	}
}

// The handler serves the Go and process collectors beside regressd's own,
// in the text format Prometheus scrapes.
func TestHandlerServesRuntimeAndOwnMetrics(t *testing.T) {
	m := New()
	m.ObserveTask("failed", time.Second)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"go_goroutines ", "process_cpu_seconds_total ", `regressd_tasks_total{status="failed"} 1`,
		"regressd_task_duration_seconds_bucket{le=\"1\"} 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// A nil *Metrics is a valid "record nothing".
func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.ObserveTask("success", time.Second)
	m.ObserveStage(StageEngineFit, time.Second)
	m.Time(StageEnginePredict)()
	m.AddRows(RowsRead, 1)
	m.GatewayCall(OutcomeSuccess)
	m.GatewayRetry(OutcomeTimeout)
	m.DeadLetter("REGRESS_JOBS", ReasonPanic)
	m.EngineCall()()
	m.ObserveRung("no_cache")
	m.ScheduleTick(false)
	m.SetSchedule("x", time.Minute, time.Now())
	m.ScheduleSucceeded("x", time.Now())
	m.ForgetSchedule("x")
	if h := m.InstrumentHandler(ServerAPI, http.NotFoundHandler()); h == nil {
		t.Fatal("nil handler")
	}
	if err := m.WatchBreaker(func() string { return "open" }); err != nil {
		t.Fatal(err)
	}
}
