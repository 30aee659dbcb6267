package bench

import "flag"

// RegisterFlags registers the benchmark's sizes and phases on fs, each
// defaulting to c's value: 'regressd bench' and its help list them.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Measurements, "measurements", c.Measurements, "measurement tables to generate")
	fs.IntVar(&c.Series, "series", c.Series, "series per measurement; one task per series")
	fs.IntVar(&c.Rows, "rows", c.Rows, "rows per series, a minute apart")
	fs.IntVar(&c.Features, "features", c.Features, "feature columns")
	fs.Float64Var(&c.GapRatio, "gap-ratio", c.GapRatio, "share of rows whose target is empty (the rows predicted)")
	fs.IntVar(&c.BatchSize, "batch-size", c.BatchSize, "query rows per batch (predict_batch_size)")
	fs.IntVar(&c.TrainRows, "train-rows", c.TrainRows, "context rows per task (max_train_rows)")
	fs.IntVar(&c.EngineTasks, "engine-tasks", c.EngineTasks, "tasks of the engine phases (2 and 4), the first of the generated ones; 0 runs them on every task")
	fs.IntVar(&c.Rounds, "rounds", c.Rounds, "rounds of phases 1 (COPY) and 3 (pipeline, trivial), alternated; their ratio is the median round's")
	fs.BoolVar(&c.Warmup, "warmup", c.Warmup, "run the trivial pipeline over every task once, unmeasured, before the rounds (prepared statements, caches)")
	fs.IntVar(&c.Clients, "clients", c.Clients, "engine calls in flight during the pipeline phases")
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "messages each role handles at once, as 'regressd run --concurrency'")
	fs.StringVar(&c.Model, "model", c.Model, "built-in model of the engine phases")
	fs.IntVar(&c.LatencyRuns, "latency-runs", c.LatencyRuns, "single webhook runs timed one at a time (0 skips them)")
	fs.IntVar(&c.LatencyContext, "latency-context", c.LatencyContext, "context rows of each timed webhook run")
	fs.IntVar(&c.LatencyQueries, "latency-queries", c.LatencyQueries, "query rows of each timed webhook run")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "after the phases, run the trivial pipeline this long and sample memory (e.g. 10m); 0 skips the soak")
	fs.DurationVar(&c.SampleEvery, "sample-every", c.SampleEvery, "soak: how often memory is sampled (each sample collects garbage and returns free pages first)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the generated tables and triggers")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write a heap profile at the end of the run (after the soak) to this file, for 'go tool pprof'")
	fs.BoolVar(&c.SkipDirect, "skip-direct", c.SkipDirect, "skip phase 2 (the direct loop with the engine) and the targets that compare with it")
	fs.StringVar(&c.EngineCPUProfile, "engine-cpuprofile", "", "write a CPU profile of phase 4 (the pipeline with the engine) to this file, for 'go tool pprof'")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the warm-up and the rounds of phases 1 and 3 (the pipeline with the trivial predictor) to this file, for 'go tool pprof'")
}
