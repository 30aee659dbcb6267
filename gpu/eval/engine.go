package eval

import (
	"context"

	"github.com/regressd/regressd/gpu"
)

// intervalLevels are the levels the engine is asked for: the central 80%
// interval.
var intervalLevels = []float64{0.1, 0.9}

// Engine predicts with a fresh regressor of the built-in model per split:
// the points, the central 80% intervals and the out-of-range flags.
func Engine(ctx context.Context, model string) DetailedPredictFunc {
	return func(X [][]float64, y []float64, Xq [][]float64) (Prediction, error) {
		r, err := gpu.NewRegressor(model)
		if err != nil {
			return Prediction{}, err
		}
		defer r.Close()
		if err := r.Fit(ctx, X, y); err != nil {
			return Prediction{}, err
		}
		p, err := r.PredictDetailed(ctx, Xq, gpu.PredictOptions{Quantiles: intervalLevels})
		if err != nil {
			return Prediction{}, err
		}
		out := Prediction{Point: p.Mean, Outside: p.Outside, Lower: make([]float64, len(Xq)), Upper: make([]float64, len(Xq))}
		for q, row := range p.Quantiles {
			out.Lower[q], out.Upper[q] = row[0], row[1]
		}
		return out, nil
	}
}
