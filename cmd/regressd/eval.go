package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/eval"
)

// evalCommand scores a built-in model on a folder of datasets.
type evalCommand struct {
	m *Main
}

func (c *evalCommand) Synopsis() string {
	return "score a built-in model on a dataset folder (R², RMSE, baselines)"
}

const evalUsage = `Usage:
  regressd eval --data DIR [--folds random|blocks] [--model SLUG] [--baselines FILE] [--json]

Runs the engine on every *.csv in DIR and scores it: the context is a
fold's train rows, the queries its test rows. --folds random (the default)
uses the fixed splits in DIR/splits/ (one row per data row, columns
seed0…seedN, 1 = test row); --folds blocks holds out each of five
contiguous fifths of the rows in file (time) order in turn, with the other
four as the context: gaps that come in runs, as outages do. Prints each
dataset's mean R² and RMSE over the folds, each fold's R² beside the best
baseline's, and the central 80% intervals (p10–p90 of the predictive
distribution) on the test rows: coverage, mean width and interval score
(Gneiting–Raftery, α = 0.2), beside the quantile baseline; "outside" counts
the queries the engine found outside the context's range.

Baselines: --baselines FILE, else DIR/baselines.json (random) or
DIR/baselines_blocks.json (blocks), else, for blocks, the figures recorded
with this build (scripts/baselines.sh), used only for data with the very
digest they were computed on. DIR/manifest.json names each file's features
and target; without it the last column is the target and every other
column except "time" a feature. Empty, NA and NaN cells are missing; a
feature column of text is one-hot encoded (at most 64 distinct values),
and a text cell among at least 95% numbers is missing (said on stderr).
Progress goes to stderr.

Flags:
`

// evalJSON is the --json output.
type evalJSON struct {
	Model       string            `json:"model"`
	Folds       string            `json:"folds"`
	SuiteMeanR2 float64           `json:"suite_mean_r2"`
	Datasets    []evalDatasetJSON `json:"datasets"`
	// SuiteCoverage80 is the mean over datasets of the 80% intervals'
	// coverage; SuiteScoreRatio the mean of the per-dataset interval-score
	// ratios (ours / the quantile baseline's) and ScoreBelowBaseline on how
	// many datasets ours is the lower.
	SuiteCoverage80    float64            `json:"suite_coverage80"`
	SuiteScoreRatio    *float64           `json:"suite_interval_score_ratio,omitempty"`
	ScoreBelowBaseline *int               `json:"interval_score_below_baseline,omitempty"`
	BaselineSuiteMean  map[string]float64 `json:"baseline_suite_mean_r2,omitempty"`
	BaselinesFrom      string             `json:"baselines_from,omitempty"`
	Seconds            float64            `json:"seconds"`
}

type evalDatasetJSON struct {
	eval.DatasetResult
	Baselines         map[string]eval.Score `json:"baselines,omitempty"`
	BaselineIntervals *eval.IntervalScore   `json:"baseline_intervals_80,omitempty"`
	// ScoreRatio is our interval score over the quantile baseline's.
	ScoreRatio *float64 `json:"interval_score_ratio,omitempty"`
}

// evalQuantiles are the levels eval asks for: the central 80% interval.
var evalQuantiles = []float64{0.1, 0.9}

func (c *evalCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	dir := fs.String("data", "", "dataset folder (required), laid out like shared/data")
	model := fs.String("model", gpu.DefaultModel, "model slug; see 'regressd models'")
	folds := fs.String("folds", string(eval.FoldsRandom), "random (DIR/splits) or blocks (five contiguous fifths in file order)")
	blFile := fs.String("baselines", "", "baselines JSON file (default: DIR/baselines.json or DIR/baselines_blocks.json, else the recorded ones)")
	asJSON := fs.Bool("json", false, "print one JSON object with suite_mean_r2 and per-dataset figures")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), evalUsage)
		fs.PrintDefaults()
	}
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("eval takes no arguments, got %q; run 'regressd eval -h'", fs.Args())
	}
	if *dir == "" {
		return fmt.Errorf("eval: --data DIR is required; run 'regressd eval -h'")
	}
	kind := eval.Folds(*folds)
	if err := kind.Validate(); err != nil {
		return fmt.Errorf("eval: --folds: %w", err)
	}
	if _, ok := gpu.LookupModel(*model); !ok {
		return fmt.Errorf("eval: unknown model %q; run 'regressd models'", *model)
	}
	ds, err := eval.LoadFolds(*dir, kind)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	for _, d := range ds {
		for _, n := range d.Notes {
			fmt.Fprintf(c.m.Stderr, "eval: %s: %s\n", d.Name, n)
		}
	}
	bl, err := eval.LoadFoldBaselines(*dir, kind, *blFile)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if names := bl.Select(ds); len(names) > 0 {
		fmt.Fprintf(c.m.Stderr, "eval: baselines left out for %s: computed on other data (digest differs)\n", strings.Join(names, ", "))
		bl.SuiteMean = nil
	}
	start := time.Now()
	predict := func(X [][]float64, y []float64, Xq [][]float64) (eval.Prediction, error) {
		r, err := gpu.NewRegressor(*model)
		if err != nil {
			return eval.Prediction{}, err
		}
		defer r.Close()
		if err := r.Fit(ctx, X, y); err != nil {
			return eval.Prediction{}, err
		}
		p, err := r.PredictDetailed(ctx, Xq, gpu.PredictOptions{Quantiles: evalQuantiles})
		if err != nil {
			return eval.Prediction{}, err
		}
		out := eval.Prediction{Point: p.Mean, Outside: p.Outside, Lower: make([]float64, len(Xq)), Upper: make([]float64, len(Xq))}
		for q, row := range p.Quantiles {
			out.Lower[q], out.Upper[q] = row[0], row[1]
		}
		return out, nil
	}
	bar := progressBar(c.m.Stderr, start)
	res, err := eval.RunDetailed(ctx, ds, predict, bar)
	fmt.Fprintln(c.m.Stderr)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	out := evalReport(res, bl, *model, kind)
	out.Seconds = time.Since(start).Seconds()
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printEval(c.m.Stdout, out)
}

// evalReport joins the engine's scores with the baselines.
func evalReport(res eval.Result, bl *eval.Baselines, model string, kind eval.Folds) evalJSON {
	out := evalJSON{Model: model, Folds: string(kind), SuiteMeanR2: res.SuiteMeanR2, SuiteCoverage80: res.SuiteCoverage80}
	var ratios float64
	var nRatios, below int
	for _, d := range res.Datasets {
		dj := evalDatasetJSON{DatasetResult: d}
		if bl != nil {
			dj.Baselines = bl.Datasets[d.Name]
			if b, ok := bl.Intervals.Datasets[d.Name]; ok && d.Intervals != nil {
				dj.BaselineIntervals = &b
				if b.Score > 0 {
					r := d.Intervals.Score / b.Score
					dj.ScoreRatio = &r
					ratios += r
					nRatios++
					if r < 1 {
						below++
					}
				}
			}
		}
		out.Datasets = append(out.Datasets, dj)
	}
	if nRatios > 0 {
		m := ratios / float64(nRatios)
		out.SuiteScoreRatio, out.ScoreBelowBaseline = &m, &below
	}
	if bl != nil {
		out.BaselineSuiteMean = bl.SuiteMean
		out.BaselinesFrom = bl.Source
	}
	return out
}
