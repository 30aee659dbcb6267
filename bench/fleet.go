package bench

// The many-series phase (issue 21): one group_by run over a table of many
// small series, beside one run over one series of the same number of rows,
// both with the trivial predictor (what the pipeline costs) in the same
// run.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/worker"
)

// Fleet is one many-series run's shape: Series series of Rows rows.
type Fleet struct {
	Series, Rows int
}

// ParseFleets reads "1000x200,10000x50"; "" is none.
func ParseFleets(s string) ([]Fleet, error) {
	var out []Fleet
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		a, b, ok := strings.Cut(p, "x")
		n, err1 := strconv.Atoi(a)
		r, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || n < 1 || r < 2 {
			return nil, fmt.Errorf("--fleet %q: want SERIESxROWS, e.g. 1000x200", p)
		}
		out = append(out, Fleet{Series: n, Rows: r})
	}
	return out, nil
}

// fleetResult is one many-series run and its single-series peer.
type fleetResult struct {
	Series int `json:"series"`
	Rows   int `json:"rows_per_series"`
	// TotalRows are the rows of the window (Series × Rows); Predicted the
	// gaps written.
	TotalRows    int     `json:"total_rows"`
	Predicted    int     `json:"predicted_rows"`
	Seconds      float64 `json:"seconds"`
	SeriesPerSec float64 `json:"series_per_sec"`
	RowsPerSec   float64 `json:"rows_per_sec"`
	// Single is one series of TotalRows rows, one run.
	SingleSeconds    float64 `json:"single_seconds"`
	SingleRowsPerSec float64 `json:"single_rows_per_sec"`
	// Ratio is RowsPerSec over SingleRowsPerSec (target ≥ 0.5).
	Ratio float64 `json:"ratio"`
}

// fleet runs every --fleet shape.
func (c *runner) fleet(ctx context.Context, bp *benchPipeline, tag string) ([]fleetResult, error) {
	var out []fleetResult
	features := benchFeatures(c.Features)
	for i, f := range c.Fleets {
		many, one := fmt.Sprintf("regressd_bench_f%d", i), fmt.Sprintf("regressd_bench_f%d_one", i)
		gap := func(rng *rand.Rand, _, _ int) bool { return rng.Float64() < c.GapRatio }
		bar := c.bar(fmt.Sprintf("generate %dx%d", f.Series, f.Rows), 2)
		mt, err := generate(ctx, bp.Pool, genSpec{table: many, series: f.Series, rows: f.Rows, features: c.Features, gap: gap})
		if err != nil {
			return nil, err
		}
		bar.Add(1)
		ot, err := generate(ctx, bp.Pool, genSpec{table: one, series: 1, rows: f.Series * f.Rows, features: c.Features, gap: gap})
		if err != nil {
			return nil, err
		}
		bar.Add(1)
		bar.Finish()
		if !c.Keep && !c.tempDataDir {
			defer dropBench(context.WithoutCancel(ctx), bp.Pool, []string{many, one})
		}
		r := fleetResult{Series: f.Series, Rows: f.Rows, TotalRows: f.Series * f.Rows}
		gaps := 0
		for _, t := range mt {
			gaps += t.gaps
		}
		args := func(table string, gaps, rows int) map[string]string {
			return map[string]string{
				"measurement": table, "field": benchTargetCol, "feature_fields": strings.Join(features, " "),
				"model": worker.BenchModel, "min_history": "1", "max_train_rows": strconv.Itoa(c.TrainRows),
				"predict_batch_size": strconv.Itoa(c.BatchSize), "max_predict_rows": strconv.Itoa(max(gaps, 1)),
				"max_run_predict_rows": strconv.Itoa(max(gaps, 1)), "max_read_rows": strconv.Itoa(rows + 1),
				"skip_existing": "false", "window": "3650d",
			}
		}
		ma := args(many, gaps, r.TotalRows)
		ma["group_by"] = benchTag
		oa := args(one, ot[0].gaps, r.TotalRows)
		oa["tags"] = benchTag + ":" + ot[0].series
		mName, oName := fmt.Sprintf("b%s_f%d", tag, i), fmt.Sprintf("b%s_f%d_one", tag, i)
		for name, a := range map[string]map[string]string{mName: ma, oName: oa} {
			if err := bp.Triggers().Create(ctx, scheduler.Trigger{Name: name, Spec: "request:" + name, Args: a}); err != nil {
				return nil, fmt.Errorf("create bench trigger: %w", err)
			}
		}
		end := mt[0].end
		for _, t := range mt {
			if t.end.After(end) {
				end = t.end
			}
		}
		bar = c.bar(fmt.Sprintf("one series of %d rows", r.TotalRows), 1)
		t0 := time.Now()
		if _, err := bp.call(ctx, oName, ot[0].start, ot[0].end); err != nil {
			return nil, fmt.Errorf("single-series run: %w", err)
		}
		r.SingleSeconds = time.Since(t0).Seconds()
		bar.Add(1)
		bar.Finish()
		bar = c.bar(fmt.Sprintf("group_by, %d series × %d rows", f.Series, f.Rows), 1)
		t0 = time.Now()
		n, err := bp.call(ctx, mName, mt[0].start, end)
		if err != nil {
			return nil, fmt.Errorf("many-series run: %w", err)
		}
		r.Seconds = time.Since(t0).Seconds()
		bar.Add(1)
		bar.Finish()
		r.Predicted = n
		r.SeriesPerSec = float64(f.Series) / r.Seconds
		r.RowsPerSec = float64(r.TotalRows) / r.Seconds
		r.SingleRowsPerSec = float64(r.TotalRows) / r.SingleSeconds
		r.Ratio = ratio(r.RowsPerSec, r.SingleRowsPerSec)
		out = append(out, r)
	}
	return out, nil
}
