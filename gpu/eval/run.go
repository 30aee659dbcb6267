package eval

import (
	"context"
	"fmt"
	"math"
)

// PredictFunc fits on a context and predicts the queries. It is called once
// per split; implementations must not keep state between calls.
type PredictFunc func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error)

// DatasetResult is one dataset's score: means over its splits.
type DatasetResult struct {
	Name    string    `json:"name"`
	R2      float64   `json:"r2"`
	RMSE    float64   `json:"rmse"`
	SplitR2 []float64 `json:"split_r2"`
	Rows    int       `json:"rows"`
}

// Result is a whole suite's score.
type Result struct {
	Datasets    []DatasetResult `json:"datasets"`
	SuiteMeanR2 float64         `json:"suite_mean_r2"`
}

// Progress is told after each split; done counts splits finished of total.
type Progress func(done, total int, dataset string)

// Run scores predict on every split of every dataset: context = the split's
// train rows, queries = its test rows; R² per split, averaged over splits,
// then over datasets.
func Run(ctx context.Context, ds []Dataset, predict PredictFunc, progress Progress) (Result, error) {
	total := 0
	for _, d := range ds {
		total += len(d.Test)
	}
	var res Result
	done := 0
	for _, d := range ds {
		dr := DatasetResult{Name: d.Name, Rows: len(d.X)}
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
			pred, err := predict(X, y, Xq)
			if err != nil {
				return res, fmt.Errorf("%s split %d: %w", d.Name, s, err)
			}
			if len(pred) != len(yq) {
				return res, fmt.Errorf("%s split %d: %d predictions for %d queries", d.Name, s, len(pred), len(yq))
			}
			r2, rmse := R2(yq, pred), RMSE(yq, pred)
			dr.SplitR2 = append(dr.SplitR2, r2)
			dr.R2 += r2 / float64(len(d.Test))
			dr.RMSE += rmse / float64(len(d.Test))
			done++
			if progress != nil {
				progress(done, total, d.Name)
			}
		}
		res.Datasets = append(res.Datasets, dr)
		res.SuiteMeanR2 += dr.R2 / float64(len(ds))
	}
	return res, nil
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
