package eval

import (
	"context"
	"fmt"
	"math"
)

// PredictFunc fits on a context and predicts the queries. It is called once
// per split; implementations must not keep state between calls.
type PredictFunc func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error)

// Prediction is a model's answer for one split's queries: the points and,
// when the model gives them, the bounds of central 80% intervals (the 0.1
// and 0.9 quantiles) and which queries lie outside the context's range.
type Prediction struct {
	Point   []float64
	Lower   []float64 // nil: no intervals
	Upper   []float64
	Outside []bool // nil: not reported
}

// DetailedPredictFunc is PredictFunc with intervals and out-of-range flags.
type DetailedPredictFunc func(X [][]float64, y []float64, Xq [][]float64) (Prediction, error)

// DatasetResult is one dataset's score: means over its splits.
type DatasetResult struct {
	Name    string    `json:"name"`
	R2      float64   `json:"r2"`
	RMSE    float64   `json:"rmse"`
	SplitR2 []float64 `json:"split_r2"`
	Rows    int       `json:"rows"`
	// Queries is the number of test rows over all splits; Outside how
	// many of them the model said lie outside the context's range.
	Queries int `json:"queries"`
	Outside int `json:"outside,omitempty"`
	// Intervals is the quality of the central 80% intervals (means over
	// the splits), nil when the model gave none.
	Intervals *IntervalScore `json:"intervals_80,omitempty"`
}

// Result is a whole suite's score.
type Result struct {
	Datasets    []DatasetResult `json:"datasets"`
	SuiteMeanR2 float64         `json:"suite_mean_r2"`
	// SuiteCoverage80 is the mean over datasets of the 80% intervals'
	// coverage (0 when the model gave none).
	SuiteCoverage80 float64 `json:"suite_coverage80,omitempty"`
}

// Progress is told after each split; done counts splits finished of total.
type Progress func(done, total int, dataset string)

// Run scores predict on every split of every dataset: context = the split's
// train rows, queries = its test rows; R² per split, averaged over splits,
// then over datasets.
func Run(ctx context.Context, ds []Dataset, predict PredictFunc, progress Progress) (Result, error) {
	return RunDetailed(ctx, ds, func(X [][]float64, y []float64, Xq [][]float64) (Prediction, error) {
		p, err := predict(X, y, Xq)
		return Prediction{Point: p}, err
	}, progress)
}

// RunDetailed is Run for a model that may also give intervals and
// out-of-range flags; intervals are scored like R² (per split, then the
// mean over splits and over datasets).
func RunDetailed(ctx context.Context, ds []Dataset, predict DetailedPredictFunc, progress Progress) (Result, error) {
	total := 0
	for _, d := range ds {
		total += len(d.Test)
	}
	var res Result
	done, withIntervals := 0, 0
	for _, d := range ds {
		dr := DatasetResult{Name: d.Name, Rows: len(d.X)}
		var iv IntervalScore
		for s, test := range d.Test {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			var X, Xq [][]float64
			var y, yq []float64
			for i, t := range test {
				if t {
					Xq, yq = append(Xq, d.X[i]), append(yq, d.Y[i])
				} else {
					X, y = append(X, d.X[i]), append(y, d.Y[i])
				}
			}
			p, err := predict(X, y, Xq)
			if err != nil {
				return res, fmt.Errorf("%s split %d: %w", d.Name, s, err)
			}
			if err := p.check(len(yq)); err != nil {
				return res, fmt.Errorf("%s split %d: %w", d.Name, s, err)
			}
			r2, rmse := R2(yq, p.Point), RMSE(yq, p.Point)
			dr.SplitR2 = append(dr.SplitR2, r2)
			dr.R2 += r2 / float64(len(d.Test))
			dr.RMSE += rmse / float64(len(d.Test))
			dr.Queries += len(yq)
			for _, o := range p.Outside {
				if o {
					dr.Outside++
				}
			}
			if p.Lower != nil {
				sc := ScoreIntervals(yq, p.Lower, p.Upper, 0.2)
				iv.Coverage += sc.Coverage / float64(len(d.Test))
				iv.MeanWidth += sc.MeanWidth / float64(len(d.Test))
				iv.Score += sc.Score / float64(len(d.Test))
				iv.FoldCoverage80 = append(iv.FoldCoverage80, sc.Coverage)
			}
			done++
			if progress != nil {
				progress(done, total, d.Name)
			}
		}
		if len(iv.FoldCoverage80) == len(d.Test) {
			dr.Intervals = &iv
			res.SuiteCoverage80 += iv.Coverage
			withIntervals++
		}
		res.Datasets = append(res.Datasets, dr)
		res.SuiteMeanR2 += dr.R2 / float64(len(ds))
	}
	if withIntervals > 0 {
		res.SuiteCoverage80 /= float64(withIntervals)
	}
	return res, nil
}

// check says whether p answers n queries.
func (p Prediction) check(n int) error {
	if len(p.Point) != n {
		return fmt.Errorf("%d predictions for %d queries", len(p.Point), n)
	}
	if (p.Lower == nil) != (p.Upper == nil) || (p.Lower != nil && (len(p.Lower) != n || len(p.Upper) != n)) {
		return fmt.Errorf("interval bounds for %d and %d of %d queries", len(p.Lower), len(p.Upper), n)
	}
	if p.Outside != nil && len(p.Outside) != n {
		return fmt.Errorf("%d out-of-range flags for %d queries", len(p.Outside), n)
	}
	return nil
}

// ScoreIntervals scores central (1−alpha) intervals [lower, upper] against
// truth: the share of rows inside, the mean width, and the mean
// Gneiting–Raftery interval score (width plus 2/alpha times how far a
// target falls outside; Gneiting & Raftery 2007, eq. 43).
func ScoreIntervals(truth, lower, upper []float64, alpha float64) IntervalScore {
	var s IntervalScore
	n := float64(len(truth))
	for i, y := range truth {
		lo, hi := lower[i], upper[i]
		w := hi - lo
		sc := w
		switch {
		case y < lo:
			sc += 2 / alpha * (lo - y)
		case y > hi:
			sc += 2 / alpha * (y - hi)
		default:
			s.Coverage++
		}
		s.MeanWidth += w
		s.Score += sc
	}
	s.Coverage /= n
	s.MeanWidth /= n
	s.Score /= n
	return s
}

// R2 is the coefficient of determination of pred against truth.
func R2(truth, pred []float64) float64 {
	var m float64
	for _, v := range truth {
		m += v
	}
	m /= float64(len(truth))
	var ssr, sst float64
	for i, v := range truth {
		ssr += (v - pred[i]) * (v - pred[i])
		sst += (v - m) * (v - m)
	}
	if sst == 0 {
		if ssr == 0 {
			return 1
		}
		return math.Inf(-1)
	}
	return 1 - ssr/sst
}

// RMSE is the root mean squared error of pred against truth.
func RMSE(truth, pred []float64) float64 {
	var s float64
	for i, v := range truth {
		s += (v - pred[i]) * (v - pred[i])
	}
	return math.Sqrt(s / float64(len(truth)))
}
