package largectx

import (
	"context"
	"fmt"

	"github.com/regressd/regressd/gpu"
)

// A plan of several windows fits one base regressor in full on a sample of
// the whole table, and every window like it (gpu.Regressor.FitLike): the
// windows come from one table, so what Fit learns that does not belong to
// the rows — the preprocessing, the GP hyperparameters, the readout — is
// learnt once, and each window only lays out its own rows; its GP heads
// are solved when its KV cache is built (about 0.35 CPU-s), as after any
// Fit. A full fit of a 2,048-row window of model-4l costs about 6 CPU-s,
// most of it the hyperparameter search and the readout's scoring; fitted
// like the base, under a tenth of a second. On 100,000 × 8 rows
// (largectxtest.Smooth) the default policy's request took 8.2 CPU-s
// against 40.5 with every window fitted in full, in one run, R² 0.980
// against 0.959 on 1,000 queries; on the Regions tables routed R² lost up
// to 0.006 and still beat one random window by 0.02–0.06
// (docs/BENCHMARKS.md, "Large contexts", lctx).

// streamBase is the stream of the base's sample (kmeans.go lists the others).
const streamBase = 4

// baseRows is the sample of the table a plan's base is fitted on: a
// window's worth of rows, seeded, from every part of the table.
func baseRows(n, window int, seed uint32) []int {
	return sample(rng(seed, streamBase), n, window)
}

// fittedBase returns the plan's base regressor, fitting it first if no call
// has; nil when the plan has none.
func (pl *plan) fittedBase(ctx context.Context, t table, newReg NewRegressor) (*gpu.Regressor, error) {
	if pl.base == nil {
		return nil, nil
	}
	reg, _, err := pl.base.fitted(ctx, t, newReg, nil)
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	return reg, nil
}
