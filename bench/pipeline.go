package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/progress"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/worker"
)

// pipelineResult is one pipeline phase's figures.
type pipelineResult struct {
	phaseResult
	// BusBytes is what this process published to NATS during the phase
	// (the connection's OutBytes): jobs, the context object, batches,
	// results, task summaries, acks and pull requests.
	BusBytes        int64   `json:"bus_bytes"`
	BusBytesPerTask float64 `json:"bus_bytes_per_task"`
	FailedTasks     int     `json:"failed_tasks"`
}

// benchRouter sends the benchmark slug to the trivial predictor and every
// other model to the built-in engine, adding up the time spent in the
// engine. Only the bench wires it.
type benchRouter struct {
	trivial worker.Predictor
	engine  worker.Predictor
	// engineTime is the time spent in engine calls, in nanoseconds.
	engineTime atomic.Int64
}

func (r *benchRouter) Predict(ctx context.Context, req worker.Request) ([]float64, error) {
	if req.Model == worker.BenchModel {
		return r.trivial.Predict(ctx, req)
	}
	t0 := time.Now()
	defer func() { r.engineTime.Add(int64(time.Since(t0))) }()
	return r.engine.Predict(ctx, req)
}

// benchModels accepts the built-in models and, in the bench only, the
// benchmark slug.
func benchModels(slug string) error {
	if _, ok := gpu.LookupModel(slug); ok || slug == worker.BenchModel {
		return nil
	}
	return fmt.Errorf("model %q is not built in (run 'regressd models')", slug)
}

// benchPipeline is every role running in this process, started by
// pipeline.Start as 'regressd run' starts them, with the bench's predictor.
type benchPipeline struct {
	*pipeline.Pipeline
	router *benchRouter
	client *http.Client
}

// startPipeline starts the scheduler, producer, worker and writer and
// serves the engine endpoint on a free loopback port.
func startPipeline(ctx context.Context, cfg Config) (*benchPipeline, error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	router := &benchRouter{trivial: worker.NewBenchPredictor(), engine: worker.NewLocal(64)}
	p, err := pipeline.Start(ctx, pipeline.Config{Stores: cfg.Stores,
		Roles:    []pipeline.Role{pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer},
		HTTPAddr: "127.0.0.1:0", Secret: secret, Predict: router, Models: benchModels,
		Concurrency: cfg.Concurrency, WaitTimeout: 10 * time.Minute, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Clients + 1}
	return &benchPipeline{Pipeline: p, router: router, client: &http.Client{Transport: tr}}, nil
}

// triggers creates one request trigger per task, pinned to the task's series.
func (bp *benchPipeline) triggers(ctx context.Context, prefix string, tasks []benchTask, features []string, model string, trainRows, batchSize int) ([]string, error) {
	names := make([]string, len(tasks))
	for i, t := range tasks {
		names[i] = fmt.Sprintf("%s_%d", prefix, i)
		args := map[string]string{
			"measurement": t.table, "field": benchTargetCol, "feature_fields": strings.Join(features, " "),
			"model": model, "tags": benchTag + ":" + t.series, "min_history": "1",
			"max_train_rows": strconv.Itoa(trainRows), "predict_batch_size": strconv.Itoa(batchSize),
			"max_predict_rows": strconv.Itoa(max(t.gaps, 1)), "max_read_rows": strconv.Itoa(t.rows + 1),
			// Each mode predicts every gap again; the modes differ by model.
			"skip_existing": "false",
		}
		if err := bp.Triggers().Create(ctx, scheduler.Trigger{Name: names[i], Spec: "request:" + names[i], Args: args}); err != nil {
			return nil, fmt.Errorf("create bench trigger: %w", err)
		}
	}
	return names, nil
}

// call runs one task through the engine endpoint and waits for its answer.
func (bp *benchPipeline) call(ctx context.Context, trigger string, start, end time.Time) (written int, err error) {
	body := fmt.Sprintf(`{"start_time":%q,"end_time":%q}`, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bp.URL()+"/api/v3/engine/"+trigger, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(scheduler.HeaderServiceKey, "bench")
	res, err := bp.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("engine call: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, fmt.Errorf("engine call: %w", err)
	}
	var out struct {
		Status  string `json:"status"`
		Message string `json:"message"`
		Result  struct {
			Status  schemas.Status `json:"status"`
			Written int            `json:"written"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("engine call: HTTP %d: %s", res.StatusCode, raw)
	}
	if res.StatusCode != http.StatusOK || out.Result.Status != schemas.StatusSuccess {
		return out.Result.Written, fmt.Errorf("task on %s: HTTP %d, status %q: %s", trigger, res.StatusCode, out.Result.Status, out.Message)
	}
	return out.Result.Written, nil
}

// job is one engine call of a phase.
type job struct {
	trigger    string
	start, end time.Time
}

// drive runs jobs through the engine endpoint with `clients` calls in
// flight, and measures rows written, task latency and bus bytes.
func (bp *benchPipeline) drive(ctx context.Context, jobs []job, clients int, bar *progress.Bar) (pipelineResult, error) {
	var pr pipelineResult
	var mu sync.Mutex
	var errs []error
	lat := make([]time.Duration, 0, len(jobs))
	queue := make(chan job)
	out0 := bp.NC.Stats().OutBytes
	began := time.Now()
	var wg sync.WaitGroup
	for range max(clients, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range queue {
				t0 := time.Now()
				n, err := bp.call(ctx, j.trigger, j.start, j.end)
				d := time.Since(t0)
				mu.Lock()
				pr.Rows += int64(n)
				lat = append(lat, d)
				if err != nil {
					pr.FailedTasks++
					if len(errs) < 3 {
						errs = append(errs, err)
					}
				}
				mu.Unlock()
				bar.Add(1)
			}
		}()
	}
	for _, j := range jobs {
		select {
		case queue <- j:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	pr.finish(len(jobs), time.Since(began), lat)
	pr.BusBytes = int64(bp.NC.Stats().OutBytes - out0)
	pr.BusBytesPerTask = float64(pr.BusBytes) / float64(max(len(jobs), 1))
	if ctx.Err() != nil {
		return pr, ctx.Err()
	}
	if pr.FailedTasks > 0 {
		return pr, fmt.Errorf("%d of %d pipeline tasks failed: %w", pr.FailedTasks, len(jobs), errors.Join(errs...))
	}
	return pr, nil
}

// taskJobs is one engine call per task over the task's whole window.
func taskJobs(names []string, tasks []benchTask) []job {
	jobs := make([]job, len(tasks))
	for i, t := range tasks {
		jobs[i] = job{trigger: names[i], start: t.start, end: t.end}
	}
	return jobs
}

// deleteTriggers removes the triggers this run created.
func (bp *benchPipeline) deleteTriggers(ctx context.Context, prefix string) {
	all, err := bp.Triggers().List(ctx)
	if err != nil {
		return
	}
	for _, t := range all {
		if strings.HasPrefix(t.Name, prefix) {
			bp.Triggers().Delete(ctx, t.Name)
		}
	}
}
