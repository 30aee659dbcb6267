package worker

import (
	"context"
	"fmt"
)

// BenchModel is the model slug of the benchmark-only predictor. It is not a
// built-in model, so the model check of `regressd run` refuses triggers that
// name it; only `regressd bench` wires a worker that answers it.
const BenchModel = "regressd-bench/trivial"

// BenchPredictor is the benchmark-only trivial predictor: every query row gets
// the mean of the context's targets. It measures what the pipeline costs
// around a model that costs nothing. It refuses every model but BenchModel,
// so it can never answer a real trigger.
type BenchPredictor struct{}

var _ Predictor = BenchPredictor{}

// NewBenchPredictor returns the trivial predictor. Only `regressd bench`
// constructs one.
func NewBenchPredictor() BenchPredictor { return BenchPredictor{} }

// Predict answers every query row with the context's mean target.
func (BenchPredictor) Predict(_ context.Context, req Request) ([]float64, error) {
	if req.Model != BenchModel {
		return nil, Final(fmt.Errorf("model %q: the benchmark predictor serves only %s", req.Model, BenchModel))
	}
	if len(req.Y) == 0 {
		return nil, Final(fmt.Errorf("benchmark predictor: empty context"))
	}
	var sum float64
	for _, v := range req.Y {
		sum += v
	}
	mean := sum / float64(len(req.Y))
	out := make([]float64, len(req.Xq))
	for i := range out {
		out[i] = mean
	}
	return out, nil
}
