package gpu

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxQuantiles is the most quantile levels one PredictDetailed call takes.
const MaxQuantiles = 99

// ErrBadQuantiles is returned for quantile levels that are not numbers in
// (0, 1), or too many of them: the caller's error (a 4xx).
var ErrBadQuantiles = errors.New("bad quantile levels")

// QuantileBank is the fixed bank of levels of a whole predictive
// distribution (the vendor's output_type=full): 0.01, 0.02, …, 0.99.
func QuantileBank() []float64 {
	out := make([]float64, 99)
	for i := range out {
		out[i] = float64(i+1) / 100
	}
	return out
}

// ValidateQuantiles reports every level that is not a number in (0, 1), and
// more than MaxQuantiles levels, in one error wrapping ErrBadQuantiles.
func ValidateQuantiles(levels []float64) error {
	if len(levels) > MaxQuantiles {
		return fmt.Errorf("%w: %d levels, at most %d", ErrBadQuantiles, len(levels), MaxQuantiles)
	}
	var bad []string
	for _, t := range levels {
		if !(t > 0 && t < 1) {
			bad = append(bad, strconv.FormatFloat(t, 'g', -1, 64))
		}
	}
	if bad != nil {
		return fmt.Errorf("%w: %s not in (0, 1)", ErrBadQuantiles, strings.Join(bad, ", "))
	}
	return nil
}

// PredictOptions asks PredictDetailed for more than the point.
type PredictOptions struct {
	// Quantiles are the levels, each in (0, 1), of the quantiles to
	// return, in the caller's order (repeats allowed; at most
	// MaxQuantiles). Nil: none. QuantileBank is the whole bank.
	Quantiles []float64
}

// Prediction is PredictDetailed's answer, one entry per query row.
type Prediction struct {
	// Mean is the point prediction, the same numbers Predict returns.
	Mean []float64
	// Median is the predictive distribution's median.
	Median []float64
	// Quantiles[q][k] is query q's quantile at level Taus[k], non-decreasing
	// in the level; nil when none were asked.
	Quantiles [][]float64
	Taus      []float64
	// Outside says the query lies outside the context: beyond the range
	// of the context's rows in a column, or at least farOutside times as
	// far from the nearest context row as the context's rows lie from one
	// another. From farOutside on, a prediction leans at least half on the
	// far readout, and its interval takes at least half of its spread from
	// the errors made that far away. False for a constant model.
	Outside []bool
	// Distance is the query's distance to the nearest context row in the
	// fitted length scales, in units of the context's own spacing (the
	// 90th percentile of its rows' distances to their nearest other row):
	// about 1 or less among the context's rows, growing away from them. 0
	// for a constant model.
	Distance []float64
}

// farOutside is the distance, in spreads, from which a query is outside
// the context even within its columns' ranges (a run of missing rows): the
// far readout then has at least half the say (farness).
const farOutside = 2

// PredictDetailed is Predict with the predictive distribution and the
// query's place relative to the context. The distribution comes from the
// same fit as the point, calibrated on the context's own held-out rows
// (calibration); asking for quantiles adds well under a third to Predict's
// time (BenchmarkPredictDetailed). Safe for concurrent use after Fit.
func (r *Regressor) PredictDetailed(ctx context.Context, Xq [][]float64, opts PredictOptions) (*Prediction, error) {
	if err := ValidateQuantiles(opts.Quantiles); err != nil {
		return nil, err
	}
	c := r.fit
	if c == nil {
		return nil, ErrNotFitted
	}
	ctx, leave, err := r.cores.enter(ctx)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	defer leave()
	mean, err := r.Predict(ctx, Xq)
	if err != nil {
		return nil, err
	}
	nq := len(Xq)
	p := &Prediction{Mean: mean, Median: make([]float64, nq), Outside: make([]bool, nq), Distance: make([]float64, nq)}
	if opts.Quantiles != nil {
		p.Taus = append([]float64{}, opts.Quantiles...)
		p.Quantiles = make([][]float64, nq)
	}
	if nq == 0 {
		return p, nil
	}
	zq, err := c.pp.transform(Xq)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	edges, err := c.queryEdges(ctx, zq, nq)
	if err != nil {
		return nil, err
	}
	f := c.f
	err = parallelFor(ctx, nq, 16, func(lo, hi int) {
		var buf scaleScratch
		for q := lo; q < hi; q++ {
			var u float64
			s := c.pp.yScale
			if edges != nil {
				e := edges[q]
				u = e.u
				p.Distance[q] = e.dist
				p.Outside[q] = e.outside
				s *= c.localScale(zq[q*f:(q+1)*f], -1, &buf)
			}
			w := c.pp.tgt.point(mean[q], c.logVar(zq[q*f:(q+1)*f], &buf)) // on the fitted scale (target.go)
			at := func(tau float64) float64 { return c.pp.tgt.quantile(w + s*c.cal.spreadAt(tau, u)) }
			p.Median[q] = at(0.5)
			if p.Quantiles != nil {
				row := make([]float64, len(p.Taus))
				for k, t := range p.Taus {
					row[k] = at(t)
				}
				p.Quantiles[q] = row
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
