package gpu

import (
	"context"
	"math"
	"slices"
)

// calibration is the predictive distribution Fit learns from the context
// itself (split-conformal on held-out rows, scaled locally): a query's
// quantile at level τ is its point plus s(x)·Q_u(τ), where
//
//   - s(x) is the local scale of the readout's errors: a Gaussian-weighted
//     mean of the squared out-of-sample residuals of the context rows
//     nearest x (bandwidth: the distance to the k-th nearest), shrunk
//     toward their global mean (geometrically) by its effective number of
//     rows;
//   - Q_u(τ) = (1−u)·Q_near(τ) + u·Q_far(τ) mixes the empirical quantile
//     functions of the residuals divided by their own local scale, near:
//     of scattered rows and of block rows near the rest of the context,
//     far: of block rows far from it (farness ≥ ½). u is the query's
//     farness (edge.go), so a query away from the context takes the
//     spread of the errors made at that distance; with no far block rows
//     Q_far is Q_near.
//
// Quantile functions are non-decreasing and s > 0, so the quantiles are
// monotone in τ.
type calibration struct {
	rows   []int     // canonical rows with a scattered out-of-sample residual
	r2     []float64 // their squared residuals (standardised units)
	global float64   // mean of r2
	k      int       // neighbours that set the local bandwidth
	near   []float64 // sorted normalised residuals, near
	far    []float64 // sorted normalised residuals, far; nil: none
	z      []float64 // the points of rows when they are not the context's (FitLike); nil: the context's
}

// minGlobalR2 is the floor of the mean squared residual (standardised
// units): far below any real error, far above underflow.
const minGlobalR2 = 1e-150

// shrinkRows is the prior weight, in rows, of the global scale in the local
// one: with few effective neighbours the local mean is noise.
const shrinkRows = 4

// calibrate learns the predictive distribution from the readouts' errors on
// the held-out rows (near: scattered rows; blk: rows held out in blocks, nil
// when none). It stops with an error wrapping ctx.Err() once ctx ends.
func (c *contextFit) calibrate(ctx context.Context, near, blk *heldOut) error {
	res := near.blend(c.readoutWeights())
	if c.edge != nil && c.edge.lean != 0 {
		fo := near.cands[len(near.cands)-1]
		for a := range res {
			res[a] += c.edge.lean * (fo[a] - res[a])
		}
	}
	cal := &calibration{rows: near.rows, r2: make([]float64, len(res))}
	for a, p := range res {
		d := near.target[a] - p
		cal.r2[a] = d * d
		cal.global += d * d / float64(len(res))
	}
	if !(cal.global > minGlobalR2) {
		// An exact fit (noise-free rows): a floor the local scales, a
		// millionth of it and their logarithms stay finite at; the
		// smallest float made the scale 0 and every quantile 0/0.
		cal.global = minGlobalR2
	}
	cal.k = min(max(len(res)/20, 8), 64, len(res))
	c.cal = cal
	var err error
	if cal.near, err = c.normalised(ctx, near.rows, near.target, res); err != nil {
		return err
	}
	if blk != nil {
		p := c.blockPredict(blk)
		u := make([]float64, len(p))
		if c.edge.beyond != nil {
			for a := range p {
				u[a] = farness(blk.dist[a])
			}
		}
		e, err := c.normalised(ctx, blk.rows, blk.target, p)
		if err != nil {
			return err
		}
		nearBlock := 0
		for a, e := range e {
			if u[a] < 0.5 {
				// every other one, as in the near readout's selection
				if nearBlock%2 == 0 {
					cal.near = append(cal.near, e)
				}
				nearBlock++
			} else {
				cal.far = append(cal.far, e)
			}
		}
	}
	slices.Sort(cal.near)
	slices.Sort(cal.far)
	if len(cal.far) < minFarRows {
		cal.far = nil
	}
	return nil
}

// normalised is each residual target[a] − pred[a] of canonical row rows[a]
// divided by the local scale there, that row's own residual left out.
func (c *contextFit) normalised(ctx context.Context, rows []int, target, pred []float64) ([]float64, error) {
	out := make([]float64, len(rows))
	f := c.f
	err := parallelFor(ctx, len(rows), 64, func(lo, hi int) {
		var buf scaleScratch
		for a := lo; a < hi; a++ {
			i := rows[a]
			out[a] = (target[a] - pred[a]) / c.localScale(c.z[i*f:(i+1)*f], i, &buf)
		}
	})
	return out, err
}

// readoutWeights is the near readout as one weight per candidate in
// heldOut's order.
func (c *contextFit) readoutWeights() []float64 {
	w := []float64{c.trendW}
	for l := range c.layers {
		for h := range c.layers[l] {
			w = append(w, c.layers[l][h].w)
		}
	}
	return append(w, c.forestW)
}

// constantCalibration is the predictive distribution of a constant model
// (the context mean): the standardised targets themselves.
func constantCalibration(yt []float64) *calibration {
	return &calibration{near: slices.Sorted(slices.Values(yt)), global: 1}
}

// scaleScratch is localScale's working memory, one per goroutine: the
// calibration rows' points feature by feature (zt, built on first use for
// the calibration cal), their distances to the query and the weights'
// exponents.
type scaleScratch struct {
	d2, r2, sel, x []float64
	zt             []float64
	cal            *calibration
}

// localScale is s(x) for the standardised point x, leaving out the
// calibration rows of canonical row skip (−1: none). A constant model's
// scale is 1 (its calibration is the targets themselves). buf may be nil.
//
// The distances are f vector passes over the rows stored feature by
// feature (sqDistScaledAcc: sqDist's bits), and the weights one vector
// pass over the rows within the cut-off (expScaled with scale 1 on the
// exponents −½d/h², expNeg's bits): a row at a time with a scalar
// exponential was most of calibrate's cost.
func (c *contextFit) localScale(x []float64, skip int, buf *scaleScratch) float64 {
	cal := c.cal
	if c.edge == nil {
		return 1
	}
	if buf == nil {
		buf = &scaleScratch{}
	}
	inv := c.edge.inv
	z := c.z
	if cal.z != nil {
		z = cal.z
	}
	nr, f := len(cal.rows), c.f
	if buf.cal != cal {
		buf.zt = slices.Grow(buf.zt[:0], nr*f)[:nr*f]
		for a, i := range cal.rows {
			for d := range f {
				buf.zt[d*nr+a] = z[i*f+d]
			}
		}
		buf.cal = cal
	}
	all := slices.Grow(buf.sel[:0], nr)[:nr]
	clear(all)
	for d, w := range inv {
		sqDistScaledAcc(all, buf.zt[d*nr:(d+1)*nr], x[d], w)
	}
	d2, r2 := buf.d2[:0], buf.r2[:0]
	for a, i := range cal.rows {
		if i == skip {
			continue
		}
		d2 = append(d2, all[a])
		r2 = append(r2, cal.r2[a])
	}
	buf.d2, buf.r2 = d2, r2
	if len(d2) == 0 {
		buf.sel = all
		return math.Sqrt(cal.global)
	}
	sel := append(all[:0], d2...)
	buf.sel = sel
	h2 := kthSmallest(sel, min(cal.k, len(sel))-1)
	if !(h2 > 0) {
		h2 = math.SmallestNonzeroFloat64
	}
	// The rows within the cut-off, their exponents and residuals in row
	// order (sel and r2's own slots are reused: sel is done with).
	xs, rs := buf.x[:0], sel[:0]
	for j, d := range d2 {
		if d > 2*farExp*h2 {
			continue
		}
		xs = append(xs, -0.5*d/h2)
		rs = append(rs, r2[j])
	}
	buf.x = xs
	expScaled(xs, xs, 1, 0)
	var sw, sw2, swr float64
	for j, w := range xs {
		sw += w
		sw2 += w * w
		swr += w * rs[j]
	}
	if sw == 0 {
		return math.Sqrt(cal.global)
	}
	neff := sw * sw / sw2
	loc := max(swr/sw, cal.global*1e-6)
	// Shrink on the log scale: a scale 5× below the global one must not
	// be pulled up by the global variance's size.
	return math.Exp(0.5 * (neff*math.Log(loc) + shrinkRows*math.Log(cal.global)) / (neff + shrinkRows))
}

// empiricalQuantile is the τ-quantile of the sorted sample e: order
// statistics at plotting positions (i+1)/(m+1), linear between them,
// the extremes beyond.
func empiricalQuantile(e []float64, tau float64) float64 {
	m := len(e)
	if m == 0 {
		return 0
	}
	p := tau*float64(m+1) - 1
	switch {
	case p <= 0:
		return e[0]
	case p >= float64(m-1):
		return e[m-1]
	}
	i := int(p)
	t := p - float64(i)
	return e[i] + t*(e[i+1]-e[i])
}

// spreadAt is Q_u(τ) of the calibration.
func (cal *calibration) spreadAt(tau, u float64) float64 {
	q := empiricalQuantile(cal.near, tau)
	if cal.far != nil && u > 0 {
		q += u * (empiricalQuantile(cal.far, tau) - q)
	}
	return q
}
