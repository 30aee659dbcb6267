package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/tsdb/pgtest"
	"github.com/regressd/regressd/worker"
)

// TestBenchJSON runs the benchmark end to end at tiny sizes and
// checks that the report has every figure, with sane values. Nothing here
// is timed: CI machines are too noisy for that.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline several times")
	}
	cfg := DefaultConfig()
	cfg.DatabaseURL, cfg.DataDir = pgtest.URL(t), t.TempDir()
	cfg.Measurements, cfg.Series, cfg.Rows, cfg.Features, cfg.GapRatio = 1, 3, 160, 2, 0.25
	cfg.BatchSize, cfg.TrainRows, cfg.EngineTasks, cfg.Rounds, cfg.Clients = 12, 60, 1, 2, 2
	cfg.LatencyRuns, cfg.LatencyContext, cfg.LatencyQueries = 2, 40, 5
	cfg.Duration, cfg.SampleEvery = 1500*time.Millisecond, 300*time.Millisecond
	cfg.Fleets = []Fleet{{Series: 5, Rows: 40}}
	cfg.Command = "regressd bench --json"
	var out, errs bytes.Buffer
	cfg.Progress = &errs
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errs.String())
	}
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("bench --json printed no JSON object: %v\n%s", err, out.String())
	}
	for _, key := range []string{
		"command", "model", "cpus", "config.rounds", "tasks", "prediction_rows", "engine_prediction_rows",
		"batches_per_task", "context_rows_per_task", "peak_rss_scope",
		"raw_copy.rows_per_sec", "raw_copy_2conn.rows_per_sec", "raw_read.rows_per_sec", "direct_loop.rows_per_sec", "direct_loop.sent_bytes_per_task",
		"direct_loop.context_bytes_per_task", "direct_loop.engine_seconds",
		"pipeline_trivial.rows_per_sec", "pipeline_trivial.tasks_per_sec", "pipeline_trivial.task_latency_p50_ms",
		"pipeline_trivial.task_latency_p99_ms", "pipeline_trivial.bus_bytes_per_task", "pipeline_trivial.peak_rss_bytes",
		"pipeline_trivial.cpu_seconds", "pipeline_engine.rows_per_sec", "pipeline_engine.bus_bytes_per_task",
		"webhook.trivial_p50_ms", "webhook.engine_p50_ms", "webhook.engine_own_p50_ms", "webhook.overhead_p50_ms",
		"ratios.pipeline_trivial_vs_raw_copy", "ratios.pipeline_trivial_vs_raw_copy_2conn", "ratios.pipeline_trivial_cpu_ms_per_task",
		"ratios.pipeline_engine_vs_direct_loop", "ratios.bus_bytes_vs_direct_sent_bytes", "ratios.bus_bytes_vs_direct_context_bytes",
		"soak.tasks", "soak.rss_growth_bytes_per_min", "soak.retained_rss_growth_bytes_per_min",
		"soak.retained_rss_growth_se_bytes_per_min", "soak.goroutines_last",
	} {
		if _, ok := lookup(rep, key); !ok {
			t.Errorf("report has no %s", key)
		}
	}
	num := func(key string) float64 {
		v, _ := lookup(rep, key)
		f, _ := v.(float64)
		return f
	}
	if fl, _ := rep["fleet"].([]any); len(fl) != 1 {
		t.Errorf("fleet: %v, want one many-series run", rep["fleet"])
	} else if f := fl[0].(map[string]any); f["series"] != 5.0 || f["total_rows"] != 200.0 || f["predicted_rows"].(float64) <= 0 ||
		f["series_per_sec"].(float64) <= 0 || f["single_rows_per_sec"].(float64) <= 0 {
		t.Errorf("fleet: %v, want 5 series of 40 rows, predicted, with rates", f)
	}
	gaps := num("prediction_rows")
	if gaps <= 0 || num("tasks") != 3 {
		t.Fatalf("prediction_rows=%v tasks=%v", gaps, num("tasks"))
	}
	// Every phase writes every gap it was given: two rounds of 1 and 3.
	for key, want := range map[string]float64{
		"raw_copy.rows": 2 * gaps, "raw_copy_2conn.rows": 2 * gaps, "pipeline_trivial.rows": 2 * gaps,
		"direct_loop.rows": num("engine_prediction_rows"), "pipeline_trivial.failed_tasks": 0,
		"raw_read.rows": 3 * 160, "webhook.runs": 2,
	} {
		if got := num(key); got != want {
			t.Errorf("%s=%v, want %v", key, got, want)
		}
	}
	if got, want := num("pipeline_engine.rows"), num("engine_prediction_rows"); got <= 0 || got > want {
		t.Errorf("pipeline_engine.rows=%v, want 1…%v", got, want)
	}
	for _, key := range []string{"raw_copy.rows_per_sec", "pipeline_trivial.rows_per_sec", "pipeline_engine.rows_per_sec",
		"direct_loop.rows_per_sec", "pipeline_trivial.bus_bytes_per_task", "direct_loop.sent_bytes_per_task",
		"ratios.pipeline_trivial_vs_raw_copy", "ratios.pipeline_trivial_vs_raw_copy_2conn", "ratios.pipeline_trivial_cpu_ms_per_task",
		"raw_copy_2conn.rows_per_sec", "ratios.pipeline_engine_vs_direct_loop", "webhook.engine_own_p50_ms",
		"pipeline_trivial.peak_rss_bytes", "soak.tasks"} {
		if num(key) <= 0 {
			t.Errorf("%s=%v, want > 0", key, num(key))
		}
	}
	if targets, _ := rep["targets"].([]any); len(targets) != 7 {
		t.Errorf("targets=%v, want the five of issue 8 and two more of issue 16", rep["targets"])
	}
	if samples, _ := lookup(rep, "soak.samples"); len(samples.([]any)) < 2 {
		t.Errorf("soak samples=%v", samples)
	}
}

// lookup finds a dotted key in decoded JSON.
func lookup(v any, key string) (any, bool) {
	for _, k := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// The benchmark predictor answers only in the bench, and refuses every
// other model. (That 'regressd run' refuses its slug is pipeline's test.)
func TestBenchPredictorRefusedOutsideBench(t *testing.T) {
	if err := benchModels(worker.BenchModel); err != nil {
		t.Fatalf("the bench refuses its own model: %v", err)
	}
	req := worker.Request{Model: "regressd/model-2l", Y: []float64{1, 3}, Xq: [][]float64{{0}}}
	if _, err := worker.NewBenchPredictor().Predict(context.Background(), req); err == nil || !worker.IsFinal(err) {
		t.Fatalf("benchmark predictor answered a real model: %v", err)
	}
	req.Model = worker.BenchModel
	if got, err := worker.NewBenchPredictor().Predict(context.Background(), req); err != nil || len(got) != 1 || got[0] != 2 {
		t.Fatalf("trivial prediction=%v err=%v, want the context mean 2", got, err)
	}
}

// TestSlopePerMin: a line has its slope and no error; noise around a flat
// line has a slope within a few standard errors of none.
func TestSlopePerMin(t *testing.T) {
	var line, flat []soakSample
	for i := range 20 {
		s := float64(30 * i)
		line = append(line, soakSample{Seconds: s, RetainedBytes: int64(100 + 2*s)})
		flat = append(flat, soakSample{Seconds: s, RetainedBytes: int64(1000 + 50*(i%3))})
	}
	v := func(s soakSample) float64 { return float64(s.RetainedBytes) }
	if b, se := slopePerMin(line, v); math.Abs(b-120) > 1e-9 || se > 1e-9 {
		t.Fatalf("line: slope %v ± %v per minute, want 120 ± 0", b, se)
	}
	if b, se := slopePerMin(flat, v); se <= 0 || math.Abs(b) > 3*se {
		t.Fatalf("flat: slope %v ± %v per minute, want 0 within 3 standard errors", b, se)
	}
	if b, se := slopePerMin(line[:1], v); b != 0 || se != 0 {
		t.Fatalf("one sample: %v ± %v", b, se)
	}
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
