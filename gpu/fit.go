package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// head is one fitted attention head.
type head struct {
	spec   headSpec
	inv    []float64 // per-feature inverse length scale, bandwidth included
	sf2    float64   // signal variance, solve heads
	values []float64 // per context row, canonical order
	loo    []float64 // solve heads: leave-one-out predictions on the scored rows (Fit only)
	linv   []float64 // solve heads: the exact GP's L⁻¹ for the held-out blocks, when kept (Fit only; blocksolve.go)
	stored []float64 // solve heads: values solved on the keys as a bf16 cache stores them (kv.go storedHeads); nil: the cache build solves them
	vScale float64   // values are stored as values/vScale, so they lie in [−1, 1]
	w      float64   // readout weight
}

// contextFit is everything Fit learns from the context: the preprocessing, the
// rows in canonical order, the fitted heads and the readout. The KV cache is
// built from it; so is every uncached pass, which is why the two agree.
type contextFit struct {
	pp         *prep
	tr         *trend
	trendW     float64
	fo         *forest // a readout candidate of another kind (forest.go)
	forestW    float64
	n, f, g    int
	z          []float64 // n×f, canonical order
	anchors    []float64 // one f-vector per block of anchorBlock rows
	layers     [][headsPerLayer]head
	ys         []float64    // standardised target, canonical order
	order      []int        // canonical row k is row order[k] of the context as given
	edge       *edgeModel   // distances from the context and the far readout; nil: constant
	cal        *calibration // the predictive distribution
	hyper      [2]gpHyper   // ARD and isotropic fits, for the solve heads
	solveChunk int
	constant   bool // predict pp.yMean for every query
}

// anchorBlock is the number of consecutive canonical rows sharing one key
// anchor. Keys are stored relative to their block's anchor so that bf16 and
// int8 resolve small length scales on large coordinates (a decade of weekly
// data at a one-week scale).
const anchorBlock = 32

// fitOptions are Fit's knobs that come from the memory policy.
type fitOptions struct {
	solveChunk int // GP expert size; ≤ 0 uses the model's
}

// fitContext learns everything Fit learns. It stops with an error wrapping
// ctx.Err() once ctx ends.
func fitContext(ctx context.Context, cfg modelConfig, X [][]float64, y []float64, opt fitOptions) (*contextFit, error) {
	if len(X) == 0 {
		return nil, errors.New("empty context: fit needs at least one row")
	}
	if len(X) != len(y) {
		return nil, fmt.Errorf("context has %d rows but %d targets", len(X), len(y))
	}
	if len(X[0]) == 0 {
		return nil, errors.New("context rows have no features")
	}
	for i, v := range y {
		if missing(v) {
			return nil, fmt.Errorf("target of context row %d is not a finite number", i)
		}
	}
	pp, z, yt, err := fitPrep(X, y)
	if err != nil {
		return nil, err
	}
	n, f := len(X), pp.outDim
	c := &contextFit{pp: pp, tr: &trend{}, n: n, f: f}
	var ymin, ymax = y[0], y[0]
	for _, v := range y {
		ymin, ymax = min(ymin, v), max(ymax, v)
	}
	if f == 0 || n < 3 || ymin == ymax {
		// Nothing to learn from: the mean is the best answer.
		c.constant = true
		c.cal = constantCalibration(yt)
		c.f = max(f, 1)
		c.g = (c.f + 1) / 2
		c.z = make([]float64, n*c.f)
		c.anchors = make([]float64, ((n+anchorBlock-1)/anchorBlock)*c.f)
		return c, nil
	}
	c.g = (f + 1) / 2
	// The two hyperparameter searches are independent: they run at once.
	var ard, iso gpHyper
	searches := []func(){func() { ard = fitGP(ctx, z, n, f, yt, cfg.gp) }}
	if cfg.isoGP {
		searches = append(searches, func() { iso = fitGPIso(ctx, z, n, f, yt, cfg.gp) })
	}
	if err := parallelDo(ctx, searches...); err != nil {
		return nil, err
	}
	if !cfg.isoGP {
		iso = ard
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	order := canonicalOrder(z, n, f, ard.ell)
	var ys []float64
	c.z, ys = reorder(z, yt, f, order)
	c.anchors = blockAnchors(c.z, n, f)
	ard, iso = floorEll(ard, c.z, c.anchors, n, f, false), floorEll(iso, c.z, c.anchors, n, f, cfg.isoGP)
	solveChunk := cfg.solveChunk
	if opt.solveChunk > 0 {
		solveChunk = opt.solveChunk
	}
	c.ys = ys
	c.order = order
	c.hyper = [2]gpHyper{ard, iso}
	c.solveChunk = solveChunk
	score := c.scoreMask(cfg)
	if n > largeSolveRows {
		c.layers, err = c.storedHeads(ctx, cfg, score) // kv.go
	} else {
		c.layers, err = buildHeads(ctx, cfg, c.z, n, f, ys, ard, iso, solveChunk, score, true)
	}
	if err != nil {
		return nil, err
	}
	if err := c.stack(ctx, cfg, ys, ard, iso, solveChunk, score); err != nil {
		return nil, err
	}
	return c, nil
}

// blockAnchors returns the mean of each block of anchorBlock rows.
func blockAnchors(z []float64, n, f int) []float64 {
	nb := (n + anchorBlock - 1) / anchorBlock
	a := make([]float64, nb*f)
	for b := range nb {
		lo, hi := b*anchorBlock, min((b+1)*anchorBlock, n)
		for i := lo; i < hi; i++ {
			for d := range f {
				a[b*f+d] += z[i*f+d]
			}
		}
		for d := range f {
			a[b*f+d] /= float64(hi - lo)
		}
	}
	return a
}

func metricInv(h gpHyper, mult float64) []float64 {
	inv := make([]float64, len(h.ell))
	for d, e := range h.ell {
		inv[d] = 1 / (e * mult)
	}
	return inv
}

// buildHeads fits every head's values on (z, y): the GP solves for solve
// heads, the target itself for the others.
// score marks the rows whose leave-one-out prediction the solve heads
// should also return (nil: none). Without solve, solve heads are left
// unfitted (their values y): a caller that has their predictions by other
// means. It stops with an error wrapping ctx.Err() once ctx ends.
func buildHeads(ctx context.Context, cfg modelConfig, z []float64, n, f int, y []float64, ard, iso gpHyper, solveChunk int, score []bool, solve bool) ([][headsPerLayer]head, error) {
	if score == nil {
		score = make([]bool, n)
	}
	if !solve {
		return buildHeadsWith(cfg, y, ard, iso, nil)
	}
	return buildHeadsWith(cfg, y, ard, iso, func(h *head, hp gpHyper) (solveResult, error) {
		return fitSolve(ctx, z, n, f, h.inv, hp.sf2, hp.sn2, y, solveChunk, score)
	})
}

// buildHeadsWith is buildHeads with the solve heads solved by solve (nil:
// left unfitted).
func buildHeadsWith(cfg modelConfig, y []float64, ard, iso gpHyper, solve func(h *head, hp gpHyper) (solveResult, error)) ([][headsPerLayer]head, error) {
	layers := make([][headsPerLayer]head, len(cfg.layers))
	for l, ls := range cfg.layers {
		for k, s := range ls {
			hp := ard
			if s.metric == metricISO {
				hp = iso
			}
			h := head{spec: s, inv: metricInv(hp, s.mult), values: y}
			if s.kind == kindSolve && solve != nil {
				h.sf2 = hp.sf2
				sr, err := solve(&h, hp)
				if err != nil {
					return nil, err
				}
				h.values, h.loo, h.linv = sr.alpha, sr.loo, sr.linv
			}
			h.vScale = 0
			for _, v := range h.values {
				h.vScale = max(h.vScale, math.Abs(v))
			}
			if h.vScale == 0 {
				h.vScale = 1
			}
			layers[l][k] = h
		}
	}
	return layers, nil
}

// canonicalOrder is the order Fit lays a context out in: by the coordinate
// with the finest length scale ell relative to its spread, then by the
// original index.
func canonicalOrder(z []float64, n, f int, ell []float64) []int {
	fine := 0
	for d := range f {
		if ell[d] < ell[fine] {
			fine = d
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return z[order[a]*f+fine] < z[order[b]*f+fine] })
	return order
}

// reorder lays the rows of z (f wide) and their targets yt out in order.
func reorder(z, yt []float64, f int, order []int) (zo, yo []float64) {
	zo, yo = make([]float64, len(order)*f), make([]float64, len(order))
	for k, i := range order {
		copy(zo[k*f:(k+1)*f], z[i*f:(i+1)*f])
		yo[k] = yt[i]
	}
	return zo, yo
}

// maxKeySpan is how many length scales a context row may lie from its
// block's anchor in a coordinate: half of keyClamp. Keys are clamped at
// keyClamp, so a row further out would share its key with every other row
// past the clamp on that side (levels 0 and 1 of a quantized sensor, with
// the tiny length scale a noise-free context fits, read as one point and
// smooth heads averaged them); within half of it, a query clamped beyond
// still lies at least maxKeySpan length scales from every row of the
// block, which is as far as "far" gets (e^−288).
const maxKeySpan = keyClamp / 2

// floorEll returns h with each length scale raised, where needed, so that
// no row of z lies more than maxKeySpan of them from its block's anchor.
// Only a length scale far below the spread of a block (a lookup-like
// column) changes; h's slice is not written. An isotropic h (one length
// scale for every feature) stays isotropic.
func floorEll(h gpHyper, z, anchors []float64, n, f int, isotropic bool) gpHyper {
	span := make([]float64, f)
	for i := range n {
		a := anchors[(i/anchorBlock)*f:]
		for d := range f {
			span[d] = max(span[d], math.Abs(z[i*f+d]-a[d]))
		}
	}
	var ell []float64
	for d, e := range h.ell {
		sd := span[min(d, f-1)]
		if isotropic || len(h.ell) == 1 {
			sd = slices.Max(span)
		}
		if floor := sd / maxKeySpan; e < floor {
			if ell == nil {
				ell = slices.Clone(h.ell)
			}
			ell[d] = floor
		}
	}
	if ell != nil {
		h.ell = ell
	}
	return h
}
