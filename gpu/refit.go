package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// FitLike fits r on the context X, y (as Fit) with everything base learnt
// that does not belong to base's rows: its preprocessing (column medians,
// standardisation, projection), the GP hyperparameters, the readout's
// weights and far readouts, and the predictive distribution's quantiles.
// Only what belongs to the rows is computed again: the canonical order,
// the trend and the context's spread; the GP heads are solved when the KV
// cache is built, as after Fit.
// That skips Fit's hyperparameter search and its scoring of the readout —
// most of its cost — so it suits many contexts drawn from one table, such
// as the windows of a large-context policy (gpu/largectx), with base
// fitted once on a sample of the table. Intervals are base's: its local
// scale, read from its own rows' out-of-sample residuals.
//
// base must be fitted, with the same model; a base that learnt nothing
// (a constant model), a context of fewer than 3 rows or one the memory
// policy would subsample make FitLike a plain Fit. Safe to call concurrently with other FitLike calls
// on the same base; base must not be refitted meanwhile.
func (r *Regressor) FitLike(ctx context.Context, base *Regressor, X [][]float64, y []float64) error {
	if base == nil || base.fit == nil {
		return errors.New("fit like: base is not fitted")
	}
	if base.cfg.info.Slug != r.cfg.info.Slug {
		return fmt.Errorf("fit like: base is model %s, this regressor %s", base.cfg.info.Slug, r.cfg.info.Slug)
	}
	if len(X) < 3 || base.fit.constant {
		return r.Fit(ctx, X, y) // nothing of base's to keep
	}
	feats := int64(max(len(X[0]), 1))
	if keep := r.elementsBudget()/feats - 1; !r.streams() && int64(len(X)) > keep {
		return r.Fit(ctx, X, y) // Fit subsamples or refuses it
	}
	ctx, leave, err := r.unfit(ctx)
	if err != nil {
		return fmt.Errorf("fit like: %w", err)
	}
	defer leave()
	c, err := refitContext(ctx, r.cfg, base.fit, X, y)
	if err != nil {
		return fmt.Errorf("fit like: %w", err)
	}
	r.fit = c
	return nil
}

// refitContext is fitContext with base's row-independent choices kept.
func refitContext(ctx context.Context, cfg modelConfig, base *contextFit, X [][]float64, y []float64) (*contextFit, error) {
	if len(X) == 0 {
		return nil, errors.New("empty context: fit needs at least one row")
	}
	if len(X) != len(y) {
		return nil, fmt.Errorf("context has %d rows but %d targets", len(X), len(y))
	}
	pp := base.pp
	z, err := pp.transformRows(X, true)
	if err != nil {
		return nil, err
	}
	n, f := len(X), pp.outDim
	yt := make([]float64, n)
	for i, v := range y {
		if missing(v) {
			return nil, fmt.Errorf("target of context row %d is not a finite number", i)
		}
		yt[i] = (pp.tgt.forward(v) - pp.yMean) / pp.yScale
	}
	ard, iso := base.hyper[0], base.hyper[1]
	// Everything of base's is kept, then what belongs to the rows is
	// replaced below: a copy, so that a choice Fit learns later is kept
	// too without being named here (a row-dependent one must be added
	// below; TestFitLikeOwnContextIsFit fails until it is).
	cp := *base
	c := &cp
	c.n, c.f, c.g = n, f, (f+1)/2
	// Canonical order as fitContext lays it out.
	c.order = canonicalOrder(z, n, f, ard.ell)
	c.z, c.ys = reorder(z, yt, f, c.order)
	c.anchors = blockAnchors(c.z, n, f)
	// The window's rows lie otherwise about their own anchors: the floor
	// Fit put on base's length scales holds for base's rows only.
	ard, iso = floorEll(ard, c.z, c.anchors, n, f, false), floorEll(iso, c.z, c.anchors, n, f, cfg.isoGP)
	c.hyper = [2]gpHyper{ard, iso}
	// The heads without their solves: Fit solves the GP heads on the
	// context only to score the readout (headOutput64), and the KV cache
	// solves them again on the keys as stored (buildLayer), so with
	// base's readout there is nothing to solve here.
	if len(cfg.layers) != len(base.layers) {
		return nil, fmt.Errorf("base has %d layers, this model %d", len(base.layers), len(cfg.layers))
	}
	c.layers = make([][headsPerLayer]head, len(cfg.layers))
	for l, ls := range cfg.layers {
		for k, s := range ls {
			hp := ard
			if s.metric == metricISO {
				hp = iso
			}
			h := head{spec: s, inv: metricInv(hp, s.mult), values: c.ys, w: base.layers[l][k].w}
			if s.kind == kindSolve {
				h.sf2 = hp.sf2
			}
			for _, v := range h.values {
				h.vScale = max(h.vScale, math.Abs(v))
			}
			if h.vScale == 0 {
				h.vScale = 1
			}
			c.layers[l][k] = h
		}
	}
	c.tr, _, _ = fitTrend(c.z, n, f, c.ys)
	// The context's range and spread are the rows'; the far readouts
	// (and whatever else the edge model learnt) base's.
	e, err := c.newEdgeModel(ctx, ard)
	if err != nil {
		return nil, err
	}
	if base.edge != nil {
		be := *base.edge
		be.inv, be.spread, be.lo, be.hi = e.inv, e.spread, e.lo, e.hi
		e = &be
	}
	c.edge = e
	// Base's predictive distribution, its local scale read from base's
	// out-of-sample residuals at base's rows (the same standardised
	// space): residuals of these rows would need the scoring skipped here.
	cal := *base.cal
	if cal.z == nil { // base fitted in full, not itself like another
		cal.z = base.z
	}
	c.cal = &cal
	return c, nil
}
