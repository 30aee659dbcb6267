package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/progress"
	"github.com/regressd/regressd/worker"
)

// TrivialModel is the benchmark-only predictor of phase 3 (the context's
// mean target), which only the benchmark's pipeline accepts.
const TrivialModel = worker.BenchModel

// Config is what a benchmark run generates and how it drives the
// pipeline. DefaultConfig holds the sizes 'regressd bench' runs with.
type Config struct {
	// Stores are the bus and database to run on; an empty DataDir is a
	// temporary directory removed at the end.
	pipeline.Stores
	// Measurements tables of Series series each (one task per series) of
	// Rows rows a minute apart, Features feature columns, the target empty
	// on GapRatio of the rows.
	Measurements, Series, Rows, Features int
	GapRatio                             float64
	// BatchSize query rows per batch, TrainRows context rows per task.
	BatchSize, TrainRows int
	// EngineTasks run the engine phases (2 and 4): the first generated
	// tasks; 0 runs them on every task.
	EngineTasks int
	// Rounds of phases 1 and 3, alternated; their ratio is the median round's.
	Rounds int
	// Warmup runs the trivial pipeline over every task once, unmeasured.
	Warmup bool
	// Clients are the engine calls in flight; Concurrency the messages each
	// role handles at once.
	Clients, Concurrency int
	// Model is the built-in model of the engine phases.
	Model string
	// LatencyRuns single webhook runs of LatencyContext context rows and
	// LatencyQueries queries, timed one at a time.
	LatencyRuns, LatencyContext, LatencyQueries int
	// Duration of the soak after the phases (0 skips it), sampling memory
	// every SampleEvery.
	Duration, SampleEvery time.Duration
	// Fleets are the many-series runs (one group_by run each, beside one
	// series of as many rows); none skips the phase.
	Fleets []Fleet
	// Keep the generated tables and triggers.
	Keep bool
	// SkipDirect skips phase 2 (the direct loop), the longest with the
	// engine, and the targets that compare with it.
	SkipDirect bool
	// CPUProfile and MemProfile name profile files; empty writes none.
	// EngineCPUProfile profiles phase 4 (the pipeline with the engine).
	CPUProfile, MemProfile, EngineCPUProfile string
	// Command is the command line, echoed in the report.
	Command string
	// Logger receives the roles' logs; Progress the progress bars.
	Logger   *slog.Logger
	Progress io.Writer
}

// DefaultConfig is the benchmark 'regressd bench' runs with no flags. 64
// tasks at 8 calls in flight: a round long enough that filling and
// draining the pipeline (its latency) do not stand in for its rate.
func DefaultConfig() Config {
	return Config{Measurements: 2, Series: 32, Rows: 4000, Features: 4, GapRatio: 0.25, BatchSize: 250, TrainRows: 1000,
		EngineTasks: 2, Rounds: 3, Warmup: true, Clients: 8, Concurrency: 2, Model: EngineModel(), LatencyRuns: 10,
		LatencyContext: 1000, LatencyQueries: 50, SampleEvery: 10 * time.Second,
		Fleets: []Fleet{{Series: 1000, Rows: 200}, {Series: 10000, Rows: 50}}}
}

// EngineModel is the first built-in model that does not think.
func EngineModel() string {
	ms := gpu.Models()
	for _, m := range ms {
		if !m.Thinking {
			return m.Slug
		}
	}
	if len(ms) > 0 {
		return ms[0].Slug
	}
	return ""
}

// Validate reports every problem with the flags at once.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name  string
		v, lo int
	}{
		{"measurements", c.Measurements, 1}, {"series", c.Series, 1}, {"rows", c.Rows, 2}, {"features", c.Features, 1},
		{"batch-size", c.BatchSize, 1}, {"train-rows", c.TrainRows, 1}, {"engine-tasks", c.EngineTasks, 0},
		{"rounds", c.Rounds, 1}, {"clients", c.Clients, 1}, {"concurrency", c.Concurrency, 1},
		{"latency-runs", c.LatencyRuns, 0}, {"latency-context", c.LatencyContext, 1}, {"latency-queries", c.LatencyQueries, 1},
	} {
		if f.v < f.lo {
			errs = append(errs, fmt.Errorf("--%s %d: must be at least %d", f.name, f.v, f.lo))
		}
	}
	if !(c.GapRatio > 0 && c.GapRatio < 1) {
		errs = append(errs, fmt.Errorf("--gap-ratio %g: must be between 0 and 1, exclusive", c.GapRatio))
	}
	if _, ok := gpu.LookupModel(c.Model); !ok {
		errs = append(errs, fmt.Errorf("--model %q is not a built-in model (run 'regressd models')", c.Model))
	}
	if c.Duration < 0 || c.SampleEvery <= 0 {
		errs = append(errs, errors.New("--duration must not be negative and --sample-every must be positive"))
	}
	return errors.Join(errs...)
}

// Run generates the tables, runs every phase and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	b := &runner{Config: cfg}
	if b.DataDir == "" {
		dir, err := os.MkdirTemp("", "regressd-bench-")
		if err != nil {
			return nil, fmt.Errorf("bench data dir: %w", err)
		}
		defer os.RemoveAll(dir)
		b.DataDir, b.tempDataDir = dir, true
	}
	bp, err := startPipeline(ctx, b.Config)
	if err != nil {
		return nil, err
	}
	defer bp.Close()
	return b.run(ctx, bp)
}

// runner is one run of the benchmark.
type runner struct {
	Config
	tempDataDir bool
	// clusterDir is the private cluster's directory, for its CPU time.
	clusterDir string
}

// startProfile starts the CPU profile when --cpuprofile is set; stop ends
// it and may be called more than once.
func (c *runner) startProfile() (stop func(), err error) {
	return startCPUProfile("--cpuprofile", c.CPUProfile)
}

// startCPUProfile starts a CPU profile into file (none when empty), named
// by flag in errors; stop ends it and may be called more than once.
func startCPUProfile(flag, file string) (stop func(), err error) {
	if file == "" {
		return func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	var once sync.Once
	return func() { once.Do(func() { pprof.StopCPUProfile(); f.Close() }) }, nil
}

// measure runs one phase under a progress bar and records its peak RSS and
// CPU time in the result f returns.
func (c *runner) measure(rep *Report, name string, total int, f func(*progress.Bar) (*phaseResult, error)) error {
	if !resetPeakRSS() {
		rep.PeakRSSScope = "process"
	}
	bar := c.bar(name, total)
	db0 := c.dbCPU() // before cpu0: reading /proc is not the phase's CPU
	cpu0 := cpuTime()
	p, err := f(bar)
	bar.Finish()
	if p != nil {
		p.CPUSeconds, p.PeakRSSBytes = (cpuTime() - cpu0).Seconds(), peakRSS()
		p.DBCPUSeconds = (c.dbCPU() - db0).Seconds()
	}
	return err
}

// writeHeapProfile writes the live heap, after a collection, to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}

// dbCPU is the private cluster's CPU time so far; 0 with --database-url.
func (c *runner) dbCPU() time.Duration {
	if c.clusterDir == "" {
		return 0
	}
	return clusterCPU(c.clusterDir)
}

// bar draws one phase's progress.
func (c *runner) bar(name string, total int) *progress.Bar {
	return progress.New(c.Progress, name, total, 0)
}

// run runs every phase on bp.
func (c *runner) run(ctx context.Context, bp *benchPipeline) (*Report, error) {
	st := bp.Stack
	if st.Cluster != nil {
		c.clusterDir = st.Cluster.Dir()
	}
	rep := &Report{Command: c.Command, Model: c.Model, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		PeakRSSScope: "phase", Config: c.config()}
	features := benchFeatures(c.Features)
	var tables []string
	for i := range c.Measurements {
		tables = append(tables, benchTable(i))
	}
	if !c.Keep && !c.tempDataDir {
		defer dropBench(context.WithoutCancel(ctx), st.Pool, append(tables, latencyTable))
	}

	bar := c.bar("generate", len(tables))
	var tasks []benchTask
	for _, tbl := range tables {
		ts, err := generate(ctx, st.Pool, genSpec{table: tbl, series: c.Series, rows: c.Rows, features: c.Features,
			gap: func(rng *rand.Rand, _, _ int) bool { return rng.Float64() < c.GapRatio }})
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, ts...)
		bar.Add(1)
	}
	bar.Finish()
	rep.describe(tasks, c.TrainRows, c.BatchSize)
	if err := ensureSinks(ctx, st.Pool, tables, "copy"); err != nil {
		return nil, err
	}
	if err := ensureSinks(ctx, st.Pool, tables, "direct"); err != nil {
		return nil, err
	}

	tag := fmt.Sprintf("%06x", rand.Uint32N(1<<24)) // trigger names of this run
	if !c.Keep {
		defer bp.deleteTriggers(context.WithoutCancel(ctx), "b"+tag+"_")
	}
	stopProfile, err := c.startProfile()
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	// Phases 1 (COPY) and 3 (pipeline, trivial) alternate for --rounds rounds
	// on emptied output tables, so a burst of load on a shared machine hits
	// both alike; the ratio is the median of the rounds' ratios.
	if c.Warmup {
		names, err := bp.triggers(ctx, "b"+tag+"_w", tasks, features, worker.BenchModel, c.TrainRows, c.BatchSize)
		if err != nil {
			return nil, err
		}
		bar := c.bar("warm-up", len(tasks))
		_, err = bp.drive(ctx, taskJobs(names, tasks), c.Clients, bar)
		bar.Finish()
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var copies, copies2, trivials []phaseResult
	var trivialNames []string
	for round := range c.Rounds {
		if err := truncateOutputs(ctx, st.Pool, tables); err != nil {
			return nil, err
		}
		var cp, cp2 phaseResult
		if err := c.measure(rep, fmt.Sprintf("raw COPY %d/%d", round+1, c.Rounds), len(tasks), func(b *progress.Bar) (*phaseResult, error) {
			var err error
			cp, err = rawCopy(ctx, st.Pool, tasks, c.Model, 1, b)
			return &cp, err
		}); err != nil {
			return nil, err
		}
		if err := truncateOutputs(ctx, st.Pool, tables); err != nil {
			return nil, err
		}
		if err := c.measure(rep, fmt.Sprintf("raw COPY, 2 conns %d/%d", round+1, c.Rounds), len(tasks), func(b *progress.Bar) (*phaseResult, error) {
			var err error
			cp2, err = rawCopy(ctx, st.Pool, tasks, c.Model, 2, b)
			return &cp2, err
		}); err != nil {
			return nil, err
		}
		if err := truncateOutputs(ctx, st.Pool, tables); err != nil {
			return nil, err
		}
		names, err := bp.triggers(ctx, fmt.Sprintf("b%s_t%d", tag, round), tasks, features, worker.BenchModel, c.TrainRows, c.BatchSize)
		if err != nil {
			return nil, err
		}
		trivialNames = names
		var pr pipelineResult
		if err := c.measure(rep, fmt.Sprintf("pipeline, trivial %d/%d", round+1, c.Rounds), len(tasks), func(b *progress.Bar) (*phaseResult, error) {
			var err error
			pr, err = bp.drive(ctx, taskJobs(names, tasks), c.Clients, b)
			return &pr.phaseResult, err
		}); err != nil {
			return nil, err
		}
		copies, copies2, trivials = append(copies, cp), append(copies2, cp2), append(trivials, pr.phaseResult)
		rep.PipelineTrivial.BusBytes += pr.BusBytes
		rep.PipelineTrivial.FailedTasks += pr.FailedTasks
		rep.Rounds = append(rep.Rounds, benchRound{cp.RowsPerSec, cp2.RowsPerSec, pr.RowsPerSec, ratio(pr.RowsPerSec, cp.RowsPerSec), ratio(pr.RowsPerSec, cp2.RowsPerSec)})
	}
	stopProfile()
	rep.RawCopy, rep.RawCopy2, rep.PipelineTrivial.phaseResult = combine(copies), combine(copies2), combine(trivials)
	rep.PipelineTrivial.BusBytesPerTask = ratio(float64(rep.PipelineTrivial.BusBytes), float64(rep.PipelineTrivial.Tasks))

	if err := c.measure(rep, "raw read", len(tasks), func(b *progress.Bar) (*phaseResult, error) {
		var err error
		rep.RawRead, err = rawRead(ctx, st.Pool, tasks, features, b)
		return &rep.RawRead, err
	}); err != nil {
		return nil, err
	}
	engineTasks := tasks
	if c.EngineTasks > 0 && c.EngineTasks < len(tasks) {
		engineTasks = tasks[:c.EngineTasks]
	}
	rep.EngineTasks = len(engineTasks)
	for _, t := range engineTasks {
		rep.EnginePredictionRows += t.gaps
	}
	if !c.SkipDirect {
		if err := c.measure(rep, "direct loop, engine", len(engineTasks), func(b *progress.Bar) (*phaseResult, error) {
			var err error
			rep.Direct, err = directLoop(ctx, st.Pool, engineTasks, features, c.Model, c.TrainRows, c.BatchSize, b)
			return &rep.Direct.phaseResult, err
		}); err != nil {
			return nil, err
		}
	}
	names, err := bp.triggers(ctx, "b"+tag+"_e", engineTasks, features, c.Model, c.TrainRows, c.BatchSize)
	if err != nil {
		return nil, err
	}
	stopEngineProfile, err := startCPUProfile("--engine-cpuprofile", c.EngineCPUProfile)
	if err != nil {
		return nil, err
	}
	if err := c.measure(rep, "pipeline, engine", len(engineTasks), func(b *progress.Bar) (*phaseResult, error) {
		var err error
		rep.PipelineEngine, err = bp.drive(ctx, taskJobs(names, engineTasks), c.Clients, b)
		return &rep.PipelineEngine.phaseResult, err
	}); err != nil {
		stopEngineProfile()
		return nil, err
	}
	stopEngineProfile()
	if rep.Webhook, err = c.webhook(ctx, bp, tag); err != nil {
		return nil, err
	}
	if rep.Fleet, err = c.fleet(ctx, bp, tag); err != nil {
		return nil, err
	}
	if c.Duration > 0 {
		if rep.Soak, err = c.soak(ctx, bp, trivialNames, tasks); err != nil {
			return nil, err
		}
	}
	if c.MemProfile != "" {
		if err := writeHeapProfile(c.MemProfile); err != nil {
			return nil, err
		}
	}
	rep.compare()
	return rep, nil
}
