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
	"github.com/regressd/regressd/progress"
)

// evalCommand scores a built-in model on a folder of datasets.
type evalCommand struct {
	m *Main
}

func (c *evalCommand) Synopsis() string {
	return "score a built-in model on a dataset folder (R², RMSE, baselines)"
}

func (c *evalCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	dir := fs.String("data", "", "dataset folder (required), laid out like shared/data")
	model := fs.String("model", gpu.DefaultModel, "model slug; see 'regressd models'")
	folds := fs.String("folds", string(eval.FoldsRandom), "random (DIR/splits) or blocks (five contiguous fifths in file order)")
	blFile := fs.String("baselines", "", "baselines JSON file (default: DIR/baselines.json or DIR/baselines_blocks.json, else the recorded ones)")
	asJSON := fs.Bool("json", false, "print one JSON object with suite_mean_r2 and per-dataset figures")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), help("eval"))
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
	var bar *progress.Bar
	res, err := eval.RunDetailed(ctx, ds, evalEngine(ctx, *model), func(done, total int, dataset string) {
		if bar == nil {
			bar = progress.New(c.m.Stderr, "eval", total, 10*time.Second)
		}
		bar.Detail(dataset)
		bar.Set(done)
	})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	out := eval.NewReport(res, bl, *model, kind)
	out.Seconds = time.Since(start).Seconds()
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return out.WriteText(c.m.Stdout)
}

// intervalLevels are the levels the engine is asked for: the central 80%
// interval.
var intervalLevels = []float64{0.1, 0.9}

// evalEngine predicts with a fresh regressor of the built-in model per split:
// the points, the central 80% intervals and the out-of-range flags.
func evalEngine(ctx context.Context, model string) eval.DetailedPredictFunc {
	return func(X [][]float64, y []float64, Xq [][]float64) (eval.Prediction, error) {
		r, err := gpu.NewRegressor(model)
		if err != nil {
			return eval.Prediction{}, err
		}
		defer r.Close()
		if err := r.Fit(ctx, X, y); err != nil {
			return eval.Prediction{}, err
		}
		p, err := r.PredictDetailed(ctx, Xq, gpu.PredictOptions{Quantiles: intervalLevels})
		if err != nil {
			return eval.Prediction{}, err
		}
		out := eval.Prediction{Point: p.Mean, Outside: p.Outside, Lower: make([]float64, len(Xq)), Upper: make([]float64, len(Xq))}
		for q, row := range p.Quantiles {
			out.Lower[q], out.Upper[q] = row[0], row[1]
		}
		return out, nil
	}
}
