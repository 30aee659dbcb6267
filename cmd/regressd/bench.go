package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/worker"
)

// benchCommand measures the pipeline against the limits of PostgreSQL and
// against the in-database plugin's design, side by side in one run.
type benchCommand struct {
	m      *Main
	common commonFlags

	jsonOut      bool
	measurements int
	series       int
	rows         int
	features     int
	gapRatio     float64
	batchSize    int
	trainRows    int
	engineTasks  int
	rounds       int
	warmup       bool
	clients      int
	concurrency  int
	model        string
	latRuns      int
	latContext   int
	latQueries   int
	duration     time.Duration
	sampleEvery  time.Duration
	keep         bool
	cpuProfile   string
	memProfile   string
	tempDataDir  bool
	clusterDir   string
}

func (c *benchCommand) Synopsis() string {
	return "measure the pipeline against raw COPY, raw reads and a direct plugin-style loop"
}

func (c *benchCommand) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.StringVar(&c.common.dataDir, "data-dir", "", "where the embedded NATS store and private PostgreSQL live; empty uses a temporary directory removed at exit")
	fs.StringVar(&c.common.databaseURL, "database-url", os.Getenv("REGRESSD_DATABASE_URL"), "PostgreSQL URL; empty runs a private cluster (env REGRESSD_DATABASE_URL). Tables regressd_bench_* are created and dropped")
	fs.StringVar(&c.common.natsURL, "nats-url", os.Getenv("REGRESSD_NATS_URL"), "NATS URL(s); empty runs an embedded JetStream server. No other regressd may consume from it during the bench (env REGRESSD_NATS_URL)")
	fs.StringVar(&c.common.logLevel, "log-level", "warn", "log level of the roles: debug, info, warn or error")
	fs.BoolVar(&c.jsonOut, "json", false, "print one JSON object with every figure and ratio instead of the table")
	fs.IntVar(&c.measurements, "measurements", 2, "measurement tables to generate")
	// 64 tasks at 8 calls in flight: a round long enough that filling and
	// draining the pipeline (its latency) do not stand in for its rate.
	fs.IntVar(&c.series, "series", 32, "series per measurement; one task per series")
	fs.IntVar(&c.rows, "rows", 4000, "rows per series, a minute apart")
	fs.IntVar(&c.features, "features", 4, "feature columns")
	fs.Float64Var(&c.gapRatio, "gap-ratio", 0.25, "share of rows whose target is empty (the rows predicted)")
	fs.IntVar(&c.batchSize, "batch-size", 250, "query rows per batch (predict_batch_size)")
	fs.IntVar(&c.trainRows, "train-rows", 1000, "context rows per task (max_train_rows)")
	fs.IntVar(&c.engineTasks, "engine-tasks", 2, "tasks of the engine phases (2 and 4), the first of the generated ones; 0 runs them on every task")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds of phases 1 (COPY) and 3 (pipeline, trivial), alternated; their ratio is the median round's")
	fs.BoolVar(&c.warmup, "warmup", true, "run the trivial pipeline over every task once, unmeasured, before the rounds (prepared statements, caches)")
	fs.IntVar(&c.clients, "clients", 8, "engine calls in flight during the pipeline phases")
	fs.IntVar(&c.concurrency, "concurrency", 2, "messages each role handles at once, as 'regressd run --concurrency'")
	fs.StringVar(&c.model, "model", benchEngineModel(), "built-in model of the engine phases")
	fs.IntVar(&c.latRuns, "latency-runs", 10, "single webhook runs timed one at a time (0 skips them)")
	fs.IntVar(&c.latContext, "latency-context", 1000, "context rows of each timed webhook run")
	fs.IntVar(&c.latQueries, "latency-queries", 50, "query rows of each timed webhook run")
	fs.DurationVar(&c.duration, "duration", 0, "after the phases, run the trivial pipeline this long and sample memory (e.g. 10m); 0 skips the soak")
	fs.DurationVar(&c.sampleEvery, "sample-every", 10*time.Second, "soak: how often memory is sampled (each sample collects garbage and returns free pages first)")
	fs.BoolVar(&c.keep, "keep", false, "keep the generated tables and triggers")
	fs.StringVar(&c.memProfile, "memprofile", "", "write a heap profile at the end of the run (after the soak) to this file, for 'go tool pprof'")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the warm-up and the rounds of phases 1 and 3 (the pipeline with the trivial predictor) to this file, for 'go tool pprof'")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: regressd bench [flags]

Generates measurement tables in PostgreSQL and runs, one after the other in
this one process, on the same rows:
  1. raw COPY of as many rows as the runs predict into a table shaped like
     <measurement>_regressed, and a raw read of the same windows (the limits);
  2. a direct loop in one goroutine: read window, then per batch the whole
     context and the batch to the engine, write (an in-database plugin);
  3. the pipeline (engine endpoint, JetStream, producer, worker, writer)
     with %s, a benchmark-only predictor;
  4. the pipeline with the built-in engine;
then times single webhook runs of --latency-context/--latency-queries rows,
and with --duration watches memory under load. It prints rows/s, tasks/s,
task latency, bytes published on the bus per task, peak RSS and the ratios.

Flags:
`, worker.BenchModel)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample: regressd bench --json > bench.json\n")
	}
	return fs
}

// benchEngineModel is the first built-in model that does not think.
func benchEngineModel() string {
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
func (c *benchCommand) Validate() error {
	var errs []error
	atLeast := func(name string, v, lo int) {
		if v < lo {
			errs = append(errs, fmt.Errorf("--%s %d: must be at least %d", name, v, lo))
		}
	}
	atLeast("measurements", c.measurements, 1)
	atLeast("series", c.series, 1)
	atLeast("rows", c.rows, 2)
	atLeast("features", c.features, 1)
	atLeast("batch-size", c.batchSize, 1)
	atLeast("train-rows", c.trainRows, 1)
	atLeast("engine-tasks", c.engineTasks, 0)
	atLeast("rounds", c.rounds, 1)
	atLeast("clients", c.clients, 1)
	atLeast("concurrency", c.concurrency, 1)
	atLeast("latency-runs", c.latRuns, 0)
	atLeast("latency-context", c.latContext, 1)
	atLeast("latency-queries", c.latQueries, 1)
	if !(c.gapRatio > 0 && c.gapRatio < 1) {
		errs = append(errs, fmt.Errorf("--gap-ratio %g: must be between 0 and 1, exclusive", c.gapRatio))
	}
	if _, ok := gpu.LookupModel(c.model); !ok {
		errs = append(errs, fmt.Errorf("--model %q is not a built-in model (run 'regressd models')", c.model))
	}
	if c.duration < 0 || c.sampleEvery <= 0 {
		errs = append(errs, errors.New("--duration must not be negative and --sample-every must be positive"))
	}
	return errors.Join(errs...)
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; run 'regressd bench -h'", fs.Arg(0))
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if c.common.dataDir == "" {
		dir, err := os.MkdirTemp("", "regressd-bench-")
		if err != nil {
			return fmt.Errorf("bench data dir: %w", err)
		}
		defer os.RemoveAll(dir)
		c.common.dataDir, c.tempDataDir = dir, true
	}
	log := c.common.logger(c.m)
	st := &stack{log: log}
	defer st.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep, err := c.run(ctx, st, log, strings.Join(append([]string{"regressd", "bench"}, args...), " "))
	if err != nil {
		return err
	}
	if c.jsonOut {
		return rep.writeJSON(c.m.Stdout)
	}
	rep.writeTable(c.m.Stdout)
	return nil
}

// startProfile starts the CPU profile when --cpuprofile is set; stop ends
// it and may be called more than once.
func (c *benchCommand) startProfile() (stop func(), err error) {
	if c.cpuProfile == "" {
		return func() {}, nil
	}
	f, err := os.Create(c.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { pprof.StopCPUProfile(); f.Close() }) }, nil
}

// measure runs one phase under a progress bar and records its peak RSS and
// CPU time in the result f returns.
func (c *benchCommand) measure(rep *benchReport, name string, total int, f func(*progress) (*phaseResult, error)) error {
	if !resetPeakRSS() {
		rep.PeakRSSScope = "process"
	}
	bar := newProgress(c.m.Stderr, name, total)
	cpu0, db0 := cpuTime(), c.dbCPU()
	p, err := f(bar)
	bar.finish()
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
func (c *benchCommand) dbCPU() time.Duration {
	if c.clusterDir == "" {
		return 0
	}
	return clusterCPU(c.clusterDir)
}

// run brings up the bus and the database and runs every phase.
func (c *benchCommand) run(ctx context.Context, st *stack, log *slog.Logger, command string) (*benchReport, error) {
	if err := c.common.openBus(ctx, st, "regressd-bench"); err != nil {
		return nil, err
	}
	if err := c.m.openDatabase(ctx, &c.common, st); err != nil {
		return nil, err
	}
	if st.cluster != nil {
		c.clusterDir = st.cluster.Dir()
	}
	rep := &benchReport{Command: command, Model: c.model, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		PeakRSSScope: "phase", Config: c.config()}
	features := benchFeatures(c.features)
	var tables []string
	for i := range c.measurements {
		tables = append(tables, benchTable(i))
	}
	if !c.keep && !c.tempDataDir {
		defer dropBench(context.WithoutCancel(ctx), st.pool, append(tables, latencyTable))
	}

	bar := newProgress(c.m.Stderr, "generate", len(tables))
	var tasks []benchTask
	for _, tbl := range tables {
		ts, err := generate(ctx, st.pool, genSpec{table: tbl, series: c.series, rows: c.rows, features: c.features,
			gap: func(rng *rand.Rand, _, _ int) bool { return rng.Float64() < c.gapRatio }})
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, ts...)
		bar.add(1)
	}
	bar.finish()
	rep.describe(tasks, c.trainRows, c.batchSize)
	if err := ensureSinks(ctx, st.pool, tables, "copy"); err != nil {
		return nil, err
	}
	if err := ensureSinks(ctx, st.pool, tables, "direct"); err != nil {
		return nil, err
	}

	bp, err := c.startPipeline(ctx, st, log)
	if err != nil {
		return nil, err
	}
	tag := fmt.Sprintf("%06x", rand.Uint32N(1<<24)) // trigger names of this run
	if !c.keep {
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
	if c.warmup {
		names, err := bp.triggers(ctx, "b"+tag+"_w", tasks, features, worker.BenchModel, c.trainRows, c.batchSize)
		if err != nil {
			return nil, err
		}
		bar := newProgress(c.m.Stderr, "warm-up", len(tasks))
		_, err = bp.drive(ctx, st, taskJobs(names, tasks), c.clients, bar)
		bar.finish()
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var copies, trivials []phaseResult
	var trivialNames []string
	for round := range c.rounds {
		if err := truncateOutputs(ctx, st.pool, tables); err != nil {
			return nil, err
		}
		var cp phaseResult
		if err := c.measure(rep, fmt.Sprintf("raw COPY %d/%d", round+1, c.rounds), len(tasks), func(b *progress) (*phaseResult, error) {
			var err error
			cp, err = rawCopy(ctx, st.pool, tasks, c.model, b)
			return &cp, err
		}); err != nil {
			return nil, err
		}
		names, err := bp.triggers(ctx, fmt.Sprintf("b%s_t%d", tag, round), tasks, features, worker.BenchModel, c.trainRows, c.batchSize)
		if err != nil {
			return nil, err
		}
		trivialNames = names
		var pr pipelineResult
		if err := c.measure(rep, fmt.Sprintf("pipeline, trivial %d/%d", round+1, c.rounds), len(tasks), func(b *progress) (*phaseResult, error) {
			var err error
			pr, err = bp.drive(ctx, st, taskJobs(names, tasks), c.clients, b)
			return &pr.phaseResult, err
		}); err != nil {
			return nil, err
		}
		copies, trivials = append(copies, cp), append(trivials, pr.phaseResult)
		rep.PipelineTrivial.BusBytes += pr.BusBytes
		rep.PipelineTrivial.FailedTasks += pr.FailedTasks
		rep.Rounds = append(rep.Rounds, benchRound{cp.RowsPerSec, pr.RowsPerSec, ratio(pr.RowsPerSec, cp.RowsPerSec)})
	}
	stopProfile()
	rep.RawCopy, rep.PipelineTrivial.phaseResult = combine(copies), combine(trivials)
	rep.PipelineTrivial.BusBytesPerTask = ratio(float64(rep.PipelineTrivial.BusBytes), float64(rep.PipelineTrivial.Tasks))

	if err := c.measure(rep, "raw read", len(tasks), func(b *progress) (*phaseResult, error) {
		var err error
		rep.RawRead, err = rawRead(ctx, st.pool, tasks, features, b)
		return &rep.RawRead, err
	}); err != nil {
		return nil, err
	}
	engineTasks := tasks
	if c.engineTasks > 0 && c.engineTasks < len(tasks) {
		engineTasks = tasks[:c.engineTasks]
	}
	rep.EngineTasks = len(engineTasks)
	for _, t := range engineTasks {
		rep.EnginePredictionRows += t.gaps
	}
	if err := c.measure(rep, "direct loop, engine", len(engineTasks), func(b *progress) (*phaseResult, error) {
		var err error
		rep.Direct, err = directLoop(ctx, st.pool, engineTasks, features, c.model, c.trainRows, c.batchSize, b)
		return &rep.Direct.phaseResult, err
	}); err != nil {
		return nil, err
	}
	names, err := bp.triggers(ctx, "b"+tag+"_e", engineTasks, features, c.model, c.trainRows, c.batchSize)
	if err != nil {
		return nil, err
	}
	if err := c.measure(rep, "pipeline, engine", len(engineTasks), func(b *progress) (*phaseResult, error) {
		var err error
		rep.PipelineEngine, err = bp.drive(ctx, st, taskJobs(names, engineTasks), c.clients, b)
		return &rep.PipelineEngine.phaseResult, err
	}); err != nil {
		return nil, err
	}
	if rep.Webhook, err = c.webhook(ctx, st, bp, tag); err != nil {
		return nil, err
	}
	if c.duration > 0 {
		if rep.Soak, err = c.soak(ctx, st, bp, trivialNames, tasks); err != nil {
			return nil, err
		}
	}
	if c.memProfile != "" {
		if err := writeHeapProfile(c.memProfile); err != nil {
			return nil, err
		}
	}
	rep.compare()
	return rep, nil
}
