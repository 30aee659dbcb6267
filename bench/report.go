package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// phaseResult is what every phase reports.
type phaseResult struct {
	Rows         int64   `json:"rows"`
	Tasks        int     `json:"tasks"`
	Seconds      float64 `json:"seconds"`
	RowsPerSec   float64 `json:"rows_per_sec"`
	TasksPerSec  float64 `json:"tasks_per_sec"`
	LatencyP50Ms float64 `json:"task_latency_p50_ms"`
	LatencyP99Ms float64 `json:"task_latency_p99_ms"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// CPUSeconds is this process's CPU time during the phase (user +
	// system; the embedded NATS server included, PostgreSQL not).
	CPUSeconds float64 `json:"cpu_seconds"`
	// DBCPUSeconds is the private PostgreSQL cluster's CPU time during the
	// phase; 0 with --database-url.
	DBCPUSeconds float64 `json:"db_cpu_seconds"`
}

func (p *phaseResult) finish(tasks int, d time.Duration, lat []time.Duration) {
	p.Tasks, p.Seconds = tasks, d.Seconds()
	p.RowsPerSec, p.TasksPerSec = rate(float64(p.Rows), d), rate(float64(tasks), d)
	p.LatencyP50Ms, p.LatencyP99Ms = percentile(lat, 50), percentile(lat, 99)
}

// combine sums rounds of one phase: rows, tasks, time and CPU add up; the
// latencies are the median of the rounds' percentiles, the peak the highest.
func combine(rounds []phaseResult) phaseResult {
	var p phaseResult
	var p50, p99 []float64
	for _, r := range rounds {
		p.Rows += r.Rows
		p.Tasks += r.Tasks
		p.Seconds += r.Seconds
		p.CPUSeconds += r.CPUSeconds
		p.DBCPUSeconds += r.DBCPUSeconds
		p.PeakRSSBytes = max(p.PeakRSSBytes, r.PeakRSSBytes)
		p50, p99 = append(p50, r.LatencyP50Ms), append(p99, r.LatencyP99Ms)
	}
	if p.Seconds > 0 {
		p.RowsPerSec, p.TasksPerSec = float64(p.Rows)/p.Seconds, float64(p.Tasks)/p.Seconds
	}
	p.LatencyP50Ms, p.LatencyP99Ms = median(p50), median(p99)
	return p
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchRound is one round of phases 1 and 3, measured back to back.
type benchRound struct {
	RawCopyRowsPerSec  float64 `json:"raw_copy_rows_per_sec"`
	RawCopy2RowsPerSec float64 `json:"raw_copy_2conn_rows_per_sec"`
	TrivialRowsPerSec  float64 `json:"pipeline_trivial_rows_per_sec"`
	TrivialVsRawCopy   float64 `json:"ratio"`
	TrivialVsRawCopy2  float64 `json:"ratio_2conn"`
}

// benchConfig echoes the sizes a report was made with.
type benchConfig struct {
	Measurements   int     `json:"measurements"`
	Series         int     `json:"series"`
	Rows           int     `json:"rows"`
	Features       int     `json:"features"`
	GapRatio       float64 `json:"gap_ratio"`
	BatchSize      int     `json:"batch_size"`
	TrainRows      int     `json:"train_rows"`
	Clients        int     `json:"clients"`
	Rounds         int     `json:"rounds"`
	EngineTasks    int     `json:"engine_tasks"`
	Concurrency    int     `json:"concurrency"`
	LatencyRuns    int     `json:"latency_runs"`
	LatencyContext int     `json:"latency_context"`
	LatencyQueries int     `json:"latency_queries"`
	DurationS      float64 `json:"duration_s"`
}

func (c *runner) config() benchConfig {
	return benchConfig{Measurements: c.Measurements, Series: c.Series, Rows: c.Rows, Features: c.Features,
		GapRatio: c.GapRatio, BatchSize: c.BatchSize, TrainRows: c.TrainRows, Clients: c.Clients, Rounds: c.Rounds, EngineTasks: c.EngineTasks,
		Concurrency: c.Concurrency, LatencyRuns: c.LatencyRuns, LatencyContext: c.LatencyContext,
		LatencyQueries: c.LatencyQueries, DurationS: c.Duration.Seconds()}
}

// benchRatios are the side-by-side comparisons of one run.
type benchRatios struct {
	// TrivialVsRawCopy is pipeline + trivial rows/s over raw COPY rows/s (3/1),
	// the median of the rounds'.
	TrivialVsRawCopy float64 `json:"pipeline_trivial_vs_raw_copy"`
	// TrivialVsRawCopy2 is the same over raw COPY on two connections.
	TrivialVsRawCopy2 float64 `json:"pipeline_trivial_vs_raw_copy_2conn"`
	// TrivialCPUMsPerTask is the pipeline's own CPU per task with the
	// trivial predictor (PostgreSQL's not counted).
	TrivialCPUMsPerTask float64 `json:"pipeline_trivial_cpu_ms_per_task"`
	// RawCopyCPUMsPerTask is raw COPY's client CPU per task beside it.
	RawCopyCPUMsPerTask float64 `json:"raw_copy_cpu_ms_per_task"`
	// EngineVsDirect is pipeline + engine rows/s over direct-loop rows/s (4/2).
	EngineVsDirect float64 `json:"pipeline_engine_vs_direct_loop"`
	// BusVsDirectSent is the engine pipeline's bus bytes per task over the
	// bytes the direct loop sends the model per task.
	BusVsDirectSent float64 `json:"bus_bytes_vs_direct_sent_bytes"`
	// BusVsDirectContext is the same over the direct loop's re-sent context
	// bytes alone.
	BusVsDirectContext float64 `json:"bus_bytes_vs_direct_context_bytes"`
}

// benchTarget is one of issue 8's targets and whether this run met it.
type benchTarget struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Met    bool    `json:"met"`
}

// Report is everything one bench run measured.
type Report struct {
	Command   string      `json:"command"`
	Model     string      `json:"model"`
	CPUs      int         `json:"cpus"`
	GoVersion string      `json:"go_version"`
	Config    benchConfig `json:"config"`
	// Tasks is the number of runs per phase (one per series).
	Tasks int `json:"tasks"`
	// PredictionRows is the number of gaps generated: what each phase writes.
	PredictionRows int `json:"prediction_rows"`
	// EngineTasks and EnginePredictionRows are the share of them the engine
	// phases (2 and 4) run.
	EngineTasks          int     `json:"engine_tasks"`
	EnginePredictionRows int     `json:"engine_prediction_rows"`
	ContextRowsPerTask   float64 `json:"context_rows_per_task"`
	BatchesPerTask       float64 `json:"batches_per_task"`
	// PeakRSSScope is "phase" when every phase's peak is its own, "process"
	// when the kernel would not reset the peak between phases.
	PeakRSSScope string `json:"peak_rss_scope"`
	// Rounds are phases 1 and 3 measured back to back, --rounds times;
	// raw_copy and pipeline_trivial add them up.
	Rounds          []benchRound   `json:"rounds"`
	RawCopy         phaseResult    `json:"raw_copy"`
	RawCopy2        phaseResult    `json:"raw_copy_2conn"`
	RawRead         phaseResult    `json:"raw_read"`
	Direct          directResult   `json:"direct_loop"`
	PipelineTrivial pipelineResult `json:"pipeline_trivial"`
	PipelineEngine  pipelineResult `json:"pipeline_engine"`
	Webhook         webhookResult  `json:"webhook"`
	Ratios          benchRatios    `json:"ratios"`
	Targets         []benchTarget  `json:"targets"`
	// Soak is null unless --duration was given.
	Soak *soakResult `json:"soak"`
	// Fleet are the many-series runs (--fleet).
	Fleet []fleetResult `json:"fleet,omitempty"`
}

func (r *Report) describe(tasks []benchTask, trainRows, batchSize int) {
	r.Tasks = len(tasks)
	var ctxRows, batches int
	for _, t := range tasks {
		r.PredictionRows += t.gaps
		ctxRows += min(t.examples, trainRows)
		batches += (t.gaps + batchSize - 1) / batchSize
	}
	r.ContextRowsPerTask = float64(ctxRows) / float64(max(len(tasks), 1))
	r.BatchesPerTask = float64(batches) / float64(max(len(tasks), 1))
}

// compare fills the ratios and checks the targets.
func (r *Report) compare() {
	r.Ratios = benchRatios{
		TrivialVsRawCopy:    r.medianRound(func(rd benchRound) float64 { return rd.TrivialVsRawCopy }),
		TrivialVsRawCopy2:   r.medianRound(func(rd benchRound) float64 { return rd.TrivialVsRawCopy2 }),
		TrivialCPUMsPerTask: cpuMsPerTask(r.PipelineTrivial.phaseResult),
		RawCopyCPUMsPerTask: cpuMsPerTask(r.RawCopy),
		EngineVsDirect:      ratio(r.PipelineEngine.RowsPerSec, r.Direct.RowsPerSec),
		BusVsDirectSent:     ratio(r.PipelineEngine.BusBytesPerTask, r.Direct.SentBytesPerTask),
		BusVsDirectContext:  ratio(r.PipelineEngine.BusBytesPerTask, r.Direct.ContextBytesPerTask),
	}
	perBatch := ratio(1, r.BatchesPerTask)
	r.Targets = []benchTarget{
		{"pipeline + trivial rows/s ÷ raw COPY rows/s (median round)", r.Ratios.TrivialVsRawCopy, "≥ 0.80", r.Ratios.TrivialVsRawCopy >= 0.8},
		{"pipeline + trivial rows/s ÷ raw COPY on 2 connections rows/s (median round)", r.Ratios.TrivialVsRawCopy2, "≥ 0.50", r.Ratios.TrivialVsRawCopy2 >= 0.5},
		{"pipeline + trivial CPU ms per task (this process)", r.Ratios.TrivialCPUMsPerTask, "≤ 8", r.Ratios.TrivialCPUMsPerTask <= 8},
	}
	if r.Direct.Tasks > 0 {
		r.Targets = append(r.Targets,
			benchTarget{"pipeline + engine rows/s ÷ direct loop rows/s", r.Ratios.EngineVsDirect, "≥ 1.00", r.Ratios.EngineVsDirect >= 1},
			benchTarget{"bus bytes/task ÷ direct loop sent bytes/task", r.Ratios.BusVsDirectSent, fmt.Sprintf("≤ %.3f (1/batches)", perBatch), r.Ratios.BusVsDirectSent <= perBatch})
	}
	if r.Webhook.Runs > 0 {
		r.Targets = append(r.Targets, benchTarget{fmt.Sprintf("webhook latency − engine time, p50 ms (%d context rows, %d queries)", r.Webhook.ContextRows, r.Webhook.QueryRows),
			r.Webhook.OverheadP50Ms, "≤ 50", r.Webhook.OverheadP50Ms <= 50})
	}
	if s := r.Soak; s != nil {
		g := s.RetainedSlope / (1 << 20)
		name := fmt.Sprintf("retained RSS growth under load, MiB/min (%.0fs soak, after %.0fs of warm-up)", s.Seconds, s.WarmupSeconds)
		if judged := s.Seconds - s.WarmupSeconds; judged < minJudged.Seconds() {
			// Too few minutes past the warm-up to tell a slope from noise.
			r.Targets = append(r.Targets, benchTarget{name, g,
				fmt.Sprintf("≤ %d (steady): soak too short, give --duration ≥ %.0fs", steadyMiBPerMin, s.WarmupSeconds+minJudged.Seconds()), false})
		} else {
			r.Targets = append(r.Targets, benchTarget{name, g, fmt.Sprintf("≤ %d (steady)", steadyMiBPerMin), g <= steadyMiBPerMin})
		}
	}
}

// steadyMiBPerMin is how much retained RSS may grow under the soak, after
// its warm-up, and still count as steady.
const steadyMiBPerMin = 1

// minJudged is the shortest stretch after the warm-up whose slope is judged.
const minJudged = 3 * time.Minute

// medianRound is the median over the rounds of one of their ratios.
func (r *Report) medianRound(of func(benchRound) float64) float64 {
	v := make([]float64, len(r.Rounds))
	for i, x := range r.Rounds {
		v[i] = of(x)
	}
	return median(v)
}

func cpuMsPerTask(p phaseResult) float64 { return 1000 * p.CPUSeconds / float64(max(p.Tasks, 1)) }

func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func (r *Report) WriteTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "%s\n%d measurements × %d series × %d rows, %d features, gap ratio %.2f → %d tasks, %d prediction rows, %.1f batches of ≤%d and %.0f context rows per task; model %s; %d CPUs\n\n",
		r.Command, c.Measurements, c.Series, c.Rows, c.Features, c.GapRatio, r.Tasks, r.PredictionRows, r.BatchesPerTask, c.BatchSize, r.ContextRowsPerTask, r.Model, r.CPUs)
	if r.Tasks < 4*c.Clients {
		fmt.Fprintf(w, "(a round of %d tasks at %d calls in flight is mostly the pipeline filling and draining: its rows/s say more about latency than rate; give more --series)\n\n", r.Tasks, c.Clients)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase                     \trows\trows/s\ttasks/s\tp50 ms\tp99 ms\tbytes/task\tpeak RSS\tCPU ms/task\t")
	line := func(name string, p phaseResult, bytes string) {
		cpu := fmt.Sprintf("%.1f+%.1f", 1000*p.CPUSeconds/float64(max(p.Tasks, 1)), 1000*p.DBCPUSeconds/float64(max(p.Tasks, 1)))
		fmt.Fprintf(tw, "%-26s\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t\n", name, p.Rows, p.RowsPerSec, p.TasksPerSec, p.LatencyP50Ms, p.LatencyP99Ms, bytes, mib(p.PeakRSSBytes), cpu)
	}
	line("1. raw COPY (write limit)", r.RawCopy, "-")
	line("1. raw COPY, 2 conns", r.RawCopy2, "-")
	line("1. raw read (read limit)", r.RawRead, "-")
	if r.Direct.Tasks > 0 {
		line("2. direct loop, engine", r.Direct.phaseResult, fmt.Sprintf("%.0f sent", r.Direct.SentBytesPerTask))
	}
	line("3. pipeline, trivial", r.PipelineTrivial.phaseResult, fmt.Sprintf("%.0f bus", r.PipelineTrivial.BusBytesPerTask))
	line("4. pipeline, engine", r.PipelineEngine.phaseResult, fmt.Sprintf("%.0f bus", r.PipelineEngine.BusBytesPerTask))
	tw.Flush()
	if r.Direct.Tasks > 0 {
		fmt.Fprintf(w, "\ndirect loop: %.2fs of %.2fs in the engine; re-sent context %.0f of %.0f bytes per task (JSON, as a plugin sends /predict)\n",
			r.Direct.EngineSeconds, r.Direct.Seconds, r.Direct.ContextBytesPerTask, r.Direct.SentBytesPerTask)
	}
	if wh := r.Webhook; wh.Runs > 0 {
		fmt.Fprintf(w, "webhook, %d runs of %d context rows and %d queries, one at a time: p50 %.1f ms trivial; engine p50 %.1f ms (p99 %.1f) of which the engine's own time p50 %.1f ms, the rest p50 %.1f ms (p99 %.1f)\n",
			wh.Runs, wh.ContextRows, wh.QueryRows, wh.TrivialP50Ms, wh.EngineP50Ms, wh.EngineP99Ms, wh.EngineOwnP50Ms, wh.OverheadP50Ms, wh.OverheadP99Ms)
	}
	if s := r.Soak; s != nil {
		fmt.Fprintf(w, "soak %.0fs: %d tasks (%.1f/s, %d failed); RSS %s → %s (max %s), growth after %.0fs of warm-up %+.1f MiB/min RSS, %+.1f ± %.1f MiB/min retained RSS, %+.1f MiB/min live Go heap (embedded NATS included); goroutines %d → %d\n",
			s.Seconds, s.Tasks, s.TasksPerSec, s.FailedTasks, mib(s.RSSFirst), mib(s.RSSLast), mib(s.RSSMax), s.WarmupSeconds, s.RSSSlope/(1<<20),
			s.RetainedSlope/(1<<20), s.RetainedSlopeSE/(1<<20), s.HeapSlope/(1<<20), s.GoroutinesFirst, s.GoroutinesLast)
	}
	for _, f := range r.Fleet {
		fmt.Fprintf(w, "group_by, %d series × %d rows, trivial: %.2fs, %.0f series/s, %.0f rows/s (%d predicted); one series of %d rows: %.2fs, %.0f rows/s; ratio %.2f (target ≥ 0.5)\n",
			f.Series, f.Rows, f.Seconds, f.SeriesPerSec, f.RowsPerSec, f.Predicted, f.TotalRows, f.SingleSeconds, f.SingleRowsPerSec, f.Ratio)
	}
	if len(r.Rounds) > 1 {
		fmt.Fprint(w, "rounds of phases 1 and 3 (pipeline rows/s ÷ raw COPY rows/s, ÷ 2-connection raw COPY rows/s):")
		for _, rd := range r.Rounds {
			fmt.Fprintf(w, " %.0f/%.0f=%.3f, /%.0f=%.3f;", rd.TrivialRowsPerSec, rd.RawCopyRowsPerSec, rd.TrivialVsRawCopy, rd.RawCopy2RowsPerSec, rd.TrivialVsRawCopy2)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "\ntargets (issues 8 and 16), measured side by side in this run:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, t := range r.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(tw, "  %s\t%.3f\t%s\t%s\n", t.Name, t.Value, t.Target, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w, "(CPU ms/task: this process + the private PostgreSQL cluster; 0 for the database with --database-url)")
	if r.PeakRSSScope != "phase" {
		fmt.Fprintln(w, "(peak RSS is the process's since start: the kernel refused to reset it between phases)")
	}
}
