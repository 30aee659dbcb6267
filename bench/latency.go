package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/worker"
)

// webhookResult is the latency of single webhook runs of a fixed size, one
// at a time, and the engine's own share of it.
type webhookResult struct {
	ContextRows int `json:"context_rows"`
	QueryRows   int `json:"query_rows"`
	Runs        int `json:"runs"`
	// TrivialP50Ms is a run with the trivial predictor: the pipeline alone.
	TrivialP50Ms float64 `json:"trivial_p50_ms"`
	TrivialP99Ms float64 `json:"trivial_p99_ms"`
	EngineP50Ms  float64 `json:"engine_p50_ms"`
	EngineP99Ms  float64 `json:"engine_p99_ms"`
	// EngineOwnP50Ms is the time the worker spent inside the engine (fit and
	// predict) during a run.
	EngineOwnP50Ms float64 `json:"engine_own_p50_ms"`
	EngineOwnP99Ms float64 `json:"engine_own_p99_ms"`
	// OverheadP50Ms is the median over runs of the run's latency less its
	// engine time: what the webhook and the pipeline add around the engine.
	OverheadP50Ms float64 `json:"overhead_p50_ms"`
	OverheadP99Ms float64 `json:"overhead_p99_ms"`
}

const latencyTable = "regressd_bench_lat"

// latencyTasks generates one series in which every window of ctx+q
// consecutive rows holds exactly q gaps, and returns runs such windows, each
// starting a few rows after the last so every run has its own context (the
// worker's fitted-context cache cannot hide the engine's time).
func latencyTasks(ctx context.Context, pool *pgxpool.Pool, ctxRows, queries, features, runs int) ([]benchTask, error) {
	span, step := ctxRows+queries, 7
	gapAt := make([]bool, span)
	for j := range queries {
		gapAt[j*span/queries] = true
	}
	all, err := generate(ctx, pool, genSpec{table: latencyTable, series: 1, rows: span + (runs-1)*step, features: features,
		gap: func(_ *rand.Rand, _, r int) bool { return gapAt[r%span] }})
	if err != nil {
		return nil, err
	}
	tasks := make([]benchTask, runs)
	for i := range tasks {
		t := all[0]
		t.start = benchBase.Add(time.Duration(i*step) * benchInterval)
		t.end = t.start.Add(time.Duration(span) * benchInterval)
		t.rows, t.gaps, t.examples = span, queries, ctxRows
		tasks[i] = t
	}
	return tasks, nil
}

// webhook measures single runs through the engine endpoint, one at a time,
// first with the trivial predictor, then with the engine.
func (c *runner) webhook(ctx context.Context, bp *benchPipeline, tag string) (webhookResult, error) {
	wr := webhookResult{ContextRows: c.LatencyContext, QueryRows: c.LatencyQueries, Runs: c.LatencyRuns}
	if c.LatencyRuns == 0 {
		return wr, nil
	}
	features := benchFeatures(c.Features)
	tasks, err := latencyTasks(ctx, bp.Pool, c.LatencyContext, c.LatencyQueries, c.Features, c.LatencyRuns)
	if err != nil {
		return wr, err
	}
	for _, mode := range []struct {
		name, model string
		p50, p99    *float64
	}{{"trivial", worker.BenchModel, &wr.TrivialP50Ms, &wr.TrivialP99Ms}, {"engine", c.Model, &wr.EngineP50Ms, &wr.EngineP99Ms}} {
		names, err := bp.triggers(ctx, "b"+tag+"_lat_"+mode.name, tasks[:1], features, mode.model, c.LatencyContext, c.LatencyQueries)
		if err != nil {
			return wr, err
		}
		var lat, own, over []time.Duration
		bar := c.bar("webhook, "+mode.name, len(tasks))
		for _, t := range tasks {
			bp.router.engineTime.Store(0)
			t0 := time.Now()
			n, err := bp.call(ctx, names[0], t.start, t.end)
			d, e := time.Since(t0), time.Duration(bp.router.engineTime.Load())
			if err == nil && n != c.LatencyQueries {
				err = fmt.Errorf("webhook run wrote %d rows, want %d", n, c.LatencyQueries)
			}
			if err != nil {
				bar.Finish()
				return wr, err
			}
			lat = append(lat, d)
			if mode.model != worker.BenchModel {
				own, over = append(own, e), append(over, d-e)
			}
			bar.Add(1)
		}
		bar.Finish()
		*mode.p50, *mode.p99 = percentile(lat, 50), percentile(lat, 99)
		if len(own) > 0 {
			wr.EngineOwnP50Ms, wr.EngineOwnP99Ms = percentile(own, 50), percentile(own, 99)
			wr.OverheadP50Ms, wr.OverheadP99Ms = percentile(over, 50), percentile(over, 99)
		}
	}
	return wr, nil
}

// soakResult is the process's memory under a steady load.
type soakResult struct {
	Seconds     float64      `json:"seconds"`
	Tasks       int          `json:"tasks"`
	FailedTasks int          `json:"failed_tasks"`
	TasksPerSec float64      `json:"tasks_per_sec"`
	Samples     []soakSample `json:"samples"`
	RSSFirst    int64        `json:"rss_first_bytes"`
	RSSLast     int64        `json:"rss_last_bytes"`
	RSSMax      int64        `json:"rss_max_bytes"`
	// WarmupSeconds is the soak's start left out of the slopes: its first
	// fifth, or three duplicate windows of the bus if longer. The server
	// holds every message id for the window and frees expired ones only
	// when they are twice the live ones, so its dedupe memory settles after
	// about three windows (six minutes at the default two).
	WarmupSeconds float64 `json:"warmup_seconds"`
	// RSSSlope is the least-squares growth of RSS over the samples after
	// the warm-up, in bytes per minute.
	RSSSlope float64 `json:"rss_growth_bytes_per_min"`
	// RetainedSlope is the same for the RSS the process retains: after a
	// collection that returns free pages to the system. RSS as sampled
	// moves by tens of MiB with the collector's cycle and the scavenger's
	// pace; what stays after a collection is what a leak would grow.
	RetainedSlope float64 `json:"retained_rss_growth_bytes_per_min"`
	// RetainedSlopeSE is the standard error of RetainedSlope: samples move
	// with the work in flight when they are taken, so a short soak cannot
	// tell a slope much smaller than about twice this from none.
	RetainedSlopeSE float64 `json:"retained_rss_growth_se_bytes_per_min"`
	// HeapSlope is the same for the live Go heap (after a collection): the
	// embedded NATS server's included.
	HeapSlope float64 `json:"heap_growth_bytes_per_min"`
	// GoroutinesFirst and GoroutinesLast count goroutines at the first and
	// last sample after the warm-up: a leak of them would show here.
	GoroutinesFirst int `json:"goroutines_first"`
	GoroutinesLast  int `json:"goroutines_last"`
}

type soakSample struct {
	Seconds       float64 `json:"t_s"`
	RSSBytes      int64   `json:"rss_bytes"`
	RetainedBytes int64   `json:"rss_retained_bytes"`
	HeapBytes     uint64  `json:"heap_live_bytes"`
	Goroutines    int     `json:"goroutines"`
}

// soak runs the trivial pipeline for c.Duration with c.Clients calls in
// flight, each run a window of its own (the task's window, its end moved by
// one microsecond per run), sampling the process's memory.
func (c *runner) soak(ctx context.Context, bp *benchPipeline, names []string, tasks []benchTask) (*soakResult, error) {
	sr := &soakResult{WarmupSeconds: c.Duration.Seconds() / 5}
	if info, err := bp.JS.Stream(ctx, schemas.StreamResults); err == nil {
		sr.WarmupSeconds = max(sr.WarmupSeconds, 3*info.CachedInfo().Config.Duplicates.Seconds())
	}
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()
	bar := c.bar("soak (seconds)", int(c.Duration.Seconds()))
	began := time.Now()
	sample := func() {
		var ms runtime.MemStats
		rss := procStatus("VmRSS")
		debug.FreeOSMemory() // a collection, and free pages returned: what is live, not what awaits collection
		runtime.ReadMemStats(&ms)
		sr.Samples = append(sr.Samples, soakSample{Seconds: time.Since(began).Seconds(), RSSBytes: rss,
			RetainedBytes: procStatus("VmRSS"), HeapBytes: ms.HeapAlloc, Goroutines: runtime.NumGoroutine()})
		bar.Set(int(time.Since(began).Seconds()))
	}
	var next, done, failed atomic.Int64
	var wg sync.WaitGroup
	for range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := next.Add(1)
				i := int(k) % len(tasks)
				t := tasks[i]
				_, err := bp.call(ctx, names[i], t.start, t.end.Add(time.Duration(k)*time.Microsecond))
				switch {
				case err == nil:
					done.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
				}
			}
		}()
	}
	sample()
	tick := time.NewTicker(c.SampleEvery)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			sample()
		case <-ctx.Done():
		}
	}
	tick.Stop()
	wg.Wait()
	sample()
	bar.Finish()
	sr.Seconds = time.Since(began).Seconds()
	// Calls cut by the deadline count neither as done nor as failed.
	sr.Tasks, sr.FailedTasks = int(done.Load()), int(failed.Load())
	sr.TasksPerSec = float64(sr.Tasks) / sr.Seconds
	sr.RSSFirst, sr.RSSLast = sr.Samples[0].RSSBytes, sr.Samples[len(sr.Samples)-1].RSSBytes
	for _, s := range sr.Samples {
		sr.RSSMax = max(sr.RSSMax, s.RSSBytes)
	}
	steady := sr.Samples
	for len(steady) > 3 && steady[0].Seconds < sr.WarmupSeconds {
		steady = steady[1:]
	}
	sr.RSSSlope, _ = slopePerMin(steady, func(s soakSample) float64 { return float64(s.RSSBytes) })
	sr.RetainedSlope, sr.RetainedSlopeSE = slopePerMin(steady, func(s soakSample) float64 { return float64(s.RetainedBytes) })
	sr.HeapSlope, _ = slopePerMin(steady, func(s soakSample) float64 { return float64(s.HeapBytes) })
	sr.GoroutinesFirst, sr.GoroutinesLast = steady[0].Goroutines, steady[len(steady)-1].Goroutines
	return sr, nil
}

// slopePerMin is the least-squares slope of v over time, per minute, and
// its standard error.
func slopePerMin(ss []soakSample, v func(soakSample) float64) (slope, se float64) {
	n := float64(len(ss))
	if n < 2 {
		return 0, 0
	}
	var mt, mv float64
	for _, s := range ss {
		mt, mv = mt+s.Seconds/n, mv+v(s)/n
	}
	var stt, stv float64
	for _, s := range ss {
		stt, stv = stt+(s.Seconds-mt)*(s.Seconds-mt), stv+(s.Seconds-mt)*(v(s)-mv)
	}
	if stt == 0 {
		return 0, 0
	}
	b := stv / stt
	if n > 2 {
		var rss float64
		for _, s := range ss {
			r := v(s) - mv - b*(s.Seconds-mt)
			rss += r * r
		}
		se = math.Sqrt(rss / (n - 2) / stt)
	}
	return 60 * b, 60 * se
}
