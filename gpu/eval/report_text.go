package eval

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteText writes three tables: per dataset the engine's R² and RMSE
// beside each baseline's R²; each fold's R² beside the best baseline of
// that fold; the 80% intervals beside the quantile baseline's.
func (out Report) WriteText(w io.Writer) error {
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
	fmt.Fprintf(w, "%s folds\n", out.Folds)
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
	fmt.Fprintf(w, "\nR² of each fold: engine / best baseline of the fold\n")
	if err := printFolds(w, out); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n80%% intervals (p10–p90) on the test rows; baseline: the quantile baseline\n")
	if err := printIntervals(w, out); err != nil {
		return err
	}
	if out.BaselinesFrom != "" {
		fmt.Fprintf(w, "baselines: %s\n", out.BaselinesFrom)
	}
	_, err := fmt.Fprintf(w, "model %s, %.1fs\n", out.Model, out.Seconds)
	return err
}

// printFolds writes one row per dataset: each fold's R², and the best
// baseline's R² on that fold where the baselines have per-fold figures.
func printFolds(w io.Writer, out Report) error {
	folds := 0
	for _, d := range out.Datasets {
		folds = max(folds, len(d.SplitR2))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := []string{"dataset"}
	for f := range folds {
		head = append(head, fmt.Sprintf("fold %d", f+1))
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, d := range out.Datasets {
		row := []string{d.Name}
		for f, r2 := range d.SplitR2 {
			cell := fmt.Sprintf("%.3f", r2)
			if name, best, ok := bestOnFold(d.Baselines, f); ok {
				cell += fmt.Sprintf(" / %.3f %s", best, name)
			}
			row = append(row, cell)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// bestOnFold is the baseline with the highest R² on fold f.
func bestOnFold(bl map[string]Score, f int) (string, float64, bool) {
	name, best, ok := "", 0.0, false
	for k, s := range bl {
		if f < len(s.FoldR2) && (!ok || s.FoldR2[f] > best || s.FoldR2[f] == best && k < name) {
			name, best, ok = k, s.FoldR2[f], true
		}
	}
	return name, best, ok
}

// printIntervals writes the 80% intervals' coverage, width and interval
// score per dataset beside the quantile baseline's, and the suite line.
func printIntervals(w io.Writer, out Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dataset\tcoverage\twidth\tscore\tbaseline coverage\tbaseline score\tratio\toutside\t")
	dash := func(ok bool, format string, v float64) string {
		if !ok {
			return "-"
		}
		return fmt.Sprintf(format, v)
	}
	for _, d := range out.Datasets {
		iv, bi := d.Intervals, d.BaselineIntervals
		if iv == nil {
			iv = &IntervalScore{}
		}
		if bi == nil {
			bi = &IntervalScore{}
		}
		ratio := 0.0
		if d.ScoreRatio != nil {
			ratio = *d.ScoreRatio
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t\n", d.Name,
			dash(d.Intervals != nil, "%.3f", iv.Coverage), dash(d.Intervals != nil, "%.4g", iv.MeanWidth), dash(d.Intervals != nil, "%.4g", iv.Score),
			dash(d.BaselineIntervals != nil, "%.3f", bi.Coverage), dash(d.BaselineIntervals != nil, "%.4g", bi.Score),
			dash(d.ScoreRatio != nil, "%.3f", ratio), d.Outside, d.Queries)
	}
	suite := fmt.Sprintf("suite mean\t%.3f\t\t\t\t\t", out.SuiteCoverage80)
	if out.SuiteScoreRatio != nil {
		suite += fmt.Sprintf("%.3f\t\t", *out.SuiteScoreRatio)
	} else {
		suite += "-\t\t"
	}
	fmt.Fprintln(tw, suite)
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.ScoreBelowBaseline != nil {
		n := 0
		for _, d := range out.Datasets {
			if d.ScoreRatio != nil {
				n++
			}
		}
		fmt.Fprintf(w, "interval score below the baseline's on %d of %d datasets\n", *out.ScoreBelowBaseline, n)
	}
	return nil
}
