package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/progress"
	"github.com/regressd/regressd/tsdb"
)

// directResult is the direct loop's figures.
type directResult struct {
	phaseResult
	// SentBytesPerTask is what the loop sends the model per task: every
	// batch's request body in the hosted /predict JSON wire form, the whole
	// context included each time.
	SentBytesPerTask float64 `json:"sent_bytes_per_task"`
	// ContextBytesPerTask is the part of SentBytesPerTask that is the context
	// sent again with every batch.
	ContextBytesPerTask float64 `json:"context_bytes_per_task"`
	// EngineSeconds is the time spent inside the engine (fit + predict).
	EngineSeconds float64 `json:"engine_seconds"`
}

// predictBody is the hosted gateway's request body, for counting bytes.
type predictBody struct {
	Model  string      `json:"model"`
	Task   string      `json:"task"`
	XTrain [][]float64 `json:"X_train"`
	YTrain []float64   `json:"y_train"`
	XTest  [][]float64 `json:"X_test"`
}

// countWriter counts what is written to it.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func jsonSize(v any) int64 {
	var c countWriter
	json.NewEncoder(&c).Encode(v)
	return c.n
}

// taskRows is a task's window split as the producer splits it: examples
// (the newest trainRows rows with a target) and queries, oldest first.
type taskRows struct {
	x     [][]float64
	y     []float64
	qx    [][]float64
	qtime []time.Time
}

// readTask reads a window with pgx as a plugin would and splits it.
func readTask(ctx context.Context, pool *pgxpool.Pool, t benchTask, features []string, trainRows int) (taskRows, error) {
	var tr taskRows
	sql, args := windowSelect(t, features)
	rows, err := pool.Query(ctx, sql, args...)
	if err != nil {
		return tr, fmt.Errorf("direct read: %w", err)
	}
	defer rows.Close()
	var ts time.Time
	var tag string
	nums := make([]pgtype.Float8, 1+len(features))
	dest := []any{&ts, &tag}
	for i := range nums {
		dest = append(dest, &nums[i])
	}
	flat := make([]float64, 0, t.rows*len(features))
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return tr, fmt.Errorf("direct read: %w", err)
		}
		start := len(flat)
		complete := true
		for _, v := range nums[1:] {
			complete = complete && v.Valid && !math.IsNaN(v.Float64)
			flat = append(flat, v.Float64)
		}
		row := flat[start:len(flat):len(flat)]
		switch {
		case !complete:
			flat = flat[:start]
		case nums[0].Valid && !math.IsNaN(nums[0].Float64) && !math.IsInf(nums[0].Float64, 0):
			if len(tr.y) < trainRows {
				tr.x, tr.y = append(tr.x, row), append(tr.y, nums[0].Float64)
			} else {
				flat = flat[:start]
			}
		default:
			tr.qx, tr.qtime = append(tr.qx, row), append(tr.qtime, ts)
		}
	}
	if err := rows.Err(); err != nil {
		return tr, fmt.Errorf("direct read: %w", err)
	}
	// Read newest first; the model gets rows oldest first, as from the producer.
	slices.Reverse(tr.x)
	slices.Reverse(tr.y)
	slices.Reverse(tr.qx)
	slices.Reverse(tr.qtime)
	return tr, nil
}

// directLoop is the in-database plugin's design, in one goroutine: read a
// window, then for every batch hand the model the whole context with the
// batch (the engine processes it again, as a stateless hosted call does) and
// write what comes back. Counting the bytes it would send is left out of its
// time.
func directLoop(ctx context.Context, pool *pgxpool.Pool, tasks []benchTask, features []string, model string, trainRows, batchSize int, bar *progress.Bar) (directResult, error) {
	var dr directResult
	var excluded, engine time.Duration
	var sent, ctxBytes int64
	lat := make([]time.Duration, 0, len(tasks))
	began := time.Now()
	for _, t := range tasks {
		t0 := time.Now()
		var taskExcluded time.Duration
		tr, err := readTask(ctx, pool, t, features, trainRows)
		if err != nil {
			return dr, err
		}
		series := sinkSeries(t.table, "direct", model, t.series)
		for lo := 0; lo < len(tr.qx); lo += batchSize {
			hi := min(lo+batchSize, len(tr.qx))
			te := time.Now()
			r, err := gpu.NewRegressor(model)
			if err != nil {
				return dr, fmt.Errorf("direct loop: %w", err)
			}
			if err := r.Fit(ctx, tr.x, tr.y); err != nil {
				return dr, fmt.Errorf("direct loop: fit: %w", err)
			}
			preds, err := r.Predict(ctx, tr.qx[lo:hi])
			if err != nil {
				return dr, fmt.Errorf("direct loop: predict: %w", err)
			}
			engine += time.Since(te)
			points := make([]tsdb.Point, 0, len(preds))
			for i, v := range preds {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					points = append(points, tsdb.Point{Time: tr.qtime[lo+i], Value: v})
				}
			}
			var n int64
			err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				n, err = tsdb.WritePredictions(ctx, tx, series, points)
				return err
			})
			if err != nil {
				return dr, fmt.Errorf("direct loop: %w", err)
			}
			dr.Rows += n

			tc := time.Now()
			sent += jsonSize(predictBody{Model: model, Task: "regression", XTrain: tr.x, YTrain: tr.y, XTest: tr.qx[lo:hi]})
			ctxBytes += jsonSize(tr.x) + jsonSize(tr.y)
			taskExcluded += time.Since(tc)
		}
		excluded += taskExcluded
		lat = append(lat, time.Since(t0)-taskExcluded)
		bar.Add(1)
	}
	dr.finish(len(tasks), time.Since(began)-excluded, lat)
	dr.SentBytesPerTask = float64(sent) / float64(max(len(tasks), 1))
	dr.ContextBytesPerTask = float64(ctxBytes) / float64(max(len(tasks), 1))
	dr.EngineSeconds = engine.Seconds()
	return dr, nil
}
