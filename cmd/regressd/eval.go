package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
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
  regressd eval --data DIR [--model SLUG] [--json]

Runs the engine on every *.csv in DIR with the fixed splits in DIR/splits/
(one row per data row, columns seed0…seedN, 1 = test row): the context is a
split's train rows, the queries its test rows. Prints each dataset's mean R²
and RMSE over the splits and the suite mean, beside the baselines in
DIR/baselines.json when present. DIR/manifest.json names each file's
features and target; without it the last column is the target and every
other column except "time" a feature. Empty, NA and NaN cells are missing;
a feature column of text is one-hot encoded (at most 64 distinct values),
and a text cell among at least 95% numbers is missing (said on stderr).
Progress goes to stderr.

Flags:
`

// evalJSON is the --json output.
type evalJSON struct {
	Model             string             `json:"model"`
	SuiteMeanR2       float64            `json:"suite_mean_r2"`
	Datasets          []evalDatasetJSON  `json:"datasets"`
	BaselineSuiteMean map[string]float64 `json:"baseline_suite_mean_r2,omitempty"`
	Seconds           float64            `json:"seconds"`
}

type evalDatasetJSON struct {
	eval.DatasetResult
	Baselines map[string]eval.Score `json:"baselines,omitempty"`
}

func (c *evalCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	dir := fs.String("data", "", "dataset folder (required), laid out like shared/data")
	model := fs.String("model", gpu.DefaultModel, "model slug; see 'regressd models'")
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
	if _, ok := gpu.LookupModel(*model); !ok {
		return fmt.Errorf("eval: unknown model %q; run 'regressd models'", *model)
	}
	ds, err := eval.Load(*dir)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	for _, d := range ds {
		for _, n := range d.Notes {
			fmt.Fprintf(c.m.Stderr, "eval: %s: %s\n", d.Name, n)
		}
	}
	bl, err := eval.LoadBaselines(*dir)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	start := time.Now()
	predict := func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error) {
		r, err := gpu.NewRegressor(*model)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		if err := r.Fit(ctx, X, y); err != nil {
			return nil, err
		}
		return r.Predict(ctx, Xq)
	}
	bar := progressBar(c.m.Stderr, start)
	res, err := eval.Run(ctx, ds, predict, bar)
	fmt.Fprintln(c.m.Stderr)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	out := evalJSON{Model: *model, SuiteMeanR2: res.SuiteMeanR2, Seconds: time.Since(start).Seconds()}
	for _, d := range res.Datasets {
		dj := evalDatasetJSON{DatasetResult: d}
		if bl != nil {
			dj.Baselines = bl.Datasets[d.Name]
		}
		out.Datasets = append(out.Datasets, dj)
	}
	if bl != nil {
		out.BaselineSuiteMean = bl.SuiteMean
	}
	if *asJSON {
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printEval(c.m.Stdout, out)
}

// printEval writes the table: one row per dataset, the engine's R² and
// RMSE, then each baseline's R².
func printEval(w io.Writer, out evalJSON) error {
	names := map[string]bool{}
	for _, d := range out.Datasets {
		for k := range d.Baselines {
			names[k] = true
		}
	}
	var bnames []string
	for k := range names {
		bnames = append(bnames, k)
	}
	sort.Strings(bnames)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := []string{"dataset", "rows", "R²", "RMSE"}
	for _, b := range bnames {
		head = append(head, b+" R²")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, d := range out.Datasets {
		row := []string{d.Name, fmt.Sprint(d.Rows), fmt.Sprintf("%.4f", d.R2), fmt.Sprintf("%.4g", d.RMSE)}
		for _, b := range bnames {
			if s, ok := d.Baselines[b]; ok {
				row = append(row, fmt.Sprintf("%.4f", s.R2))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	row := []string{"suite mean", "", fmt.Sprintf("%.4f", out.SuiteMeanR2), ""}
	for _, b := range bnames {
		if v, ok := out.BaselineSuiteMean[b]; ok {
			row = append(row, fmt.Sprintf("%.4f", v))
		} else {
			row = append(row, "-")
		}
	}
	fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "model %s, %.1fs\n", out.Model, out.Seconds)
	return err
}

// progressBar draws "[=====>    ] done/total dataset" on w, rewriting the
// line in place.
func progressBar(w io.Writer, start time.Time) eval.Progress {
	const width = 30
	return func(done, total int, dataset string) {
		fill := width * done / max(total, 1)
		bar := strings.Repeat("=", fill)
		if fill < width {
			bar += ">" + strings.Repeat(" ", width-fill-1)
		}
		fmt.Fprintf(w, "\r[%s] %d/%d %-18s %5.1fs", bar, done, total, dataset, time.Since(start).Seconds())
	}
}
