package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/regressd/regressd/bench"
)

// benchCommand measures the pipeline against the limits of PostgreSQL and
// against the in-database plugin's design, side by side in one run.
type benchCommand struct {
	m *Main
}

func (c *benchCommand) Synopsis() string {
	return "measure the pipeline against raw COPY, raw reads and a direct plugin-style loop"
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "engine" {
		return c.benchEngine(ctx, args[1:])
	}
	cfg := bench.DefaultConfig()
	var logLevel string
	var jsonOut bool
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where the embedded NATS store and private PostgreSQL live; empty uses a temporary directory removed at exit")
	secretFlag(fs, &cfg.DatabaseURL, "database-url", "REGRESSD_DATABASE_URL", "PostgreSQL URL; empty runs a private cluster. Tables regressd_bench_* are created and dropped")
	secretFlag(fs, &cfg.NATSURL, "nats-url", "REGRESSD_NATS_URL", "NATS URL(s); empty runs an embedded JetStream server. No other regressd may consume from it during the bench")
	fs.StringVar(&logLevel, "log-level", "warn", "log level of the roles: debug, info, warn or error")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object with every figure and ratio instead of the table")
	fs.IntVar(&cfg.Measurements, "measurements", cfg.Measurements, "measurement tables to generate")
	fs.IntVar(&cfg.Series, "series", cfg.Series, "series per measurement; one task per series")
	fs.IntVar(&cfg.Rows, "rows", cfg.Rows, "rows per series, a minute apart")
	fs.IntVar(&cfg.Features, "features", cfg.Features, "feature columns")
	fs.Float64Var(&cfg.GapRatio, "gap-ratio", cfg.GapRatio, "share of rows whose target is empty (the rows predicted)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "query rows per batch (predict_batch_size)")
	fs.IntVar(&cfg.TrainRows, "train-rows", cfg.TrainRows, "context rows per task (max_train_rows)")
	fs.IntVar(&cfg.EngineTasks, "engine-tasks", cfg.EngineTasks, "tasks of the engine phases (2 and 4), the first of the generated ones; 0 runs them on every task")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds of phases 1 (COPY) and 3 (pipeline, trivial), alternated; their ratio is the median round's")
	fs.BoolVar(&cfg.Warmup, "warmup", cfg.Warmup, "run the trivial pipeline over every task once, unmeasured, before the rounds (prepared statements, caches)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "engine calls in flight during the pipeline phases")
	fs.IntVar(&cfg.Concurrency, "concurrency", cfg.Concurrency, "messages each role handles at once, as 'regressd run --concurrency'")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "built-in model of the engine phases")
	fs.IntVar(&cfg.LatencyRuns, "latency-runs", cfg.LatencyRuns, "single webhook runs timed one at a time (0 skips them)")
	fs.IntVar(&cfg.LatencyContext, "latency-context", cfg.LatencyContext, "context rows of each timed webhook run")
	fs.IntVar(&cfg.LatencyQueries, "latency-queries", cfg.LatencyQueries, "query rows of each timed webhook run")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "after the phases, run the trivial pipeline this long and sample memory (e.g. 10m); 0 skips the soak")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", cfg.SampleEvery, "soak: how often memory is sampled (each sample collects garbage and returns free pages first)")
	fleets := fs.String("fleet", "1000x200,10000x50", "many-series runs, SERIESxROWS,…: one group_by run each beside one series of as many rows (empty skips them)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the generated tables and triggers")
	fs.StringVar(&cfg.MemProfile, "memprofile", "", "write a heap profile at the end of the run (after the soak) to this file, for 'go tool pprof'")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the warm-up and the rounds of phases 1 and 3 (the pipeline with the trivial predictor) to this file, for 'go tool pprof'")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), help("bench"), bench.TrivialModel)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample: regressd bench --json > bench.json\n")
	}
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; run 'regressd bench -h'", fs.Arg(0))
	}
	var err error
	if cfg.Fleets, err = bench.ParseFleets(*fleets); err != nil {
		return err
	}
	cfg.Command = strings.Join(append([]string{"regressd", "bench"}, args...), " ")
	cfg.Logger = (&commonFlags{logLevel: logLevel}).logger(c.m)
	cfg.Progress = c.m.Stderr
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
		return rep.WriteJSON(c.m.Stdout)
	}
	rep.WriteTable(c.m.Stdout)
	return nil
}
