package gpu

import (
	"context"
	"math"
	"slices"
)

// edgeModel is what Fit learns about queries away from the context: how far
// a query is (its distance to the nearest context row in the ARD metric,
// relative to how far the context's rows lie from their own nearest
// neighbours) and far readouts, chosen on contiguous blocks of the context
// held out in turn (blockCandidates), where leave-one-out's scattered rows
// say nothing about a run of missing rows. A query's prediction is
// (1−u)·near + u·far, u rising from 0 to 1 with its distance (farness).
//
// A run past the context's range (before or after it, in time) calls for
// extrapolation, and has its own far readout, chosen on the block rows
// that lay outside the range of the blocks they were predicted from; rows
// of a gap inside the range reward predictors that read both sides of it
// (the nearest rows on either side; even the context mean, in the middle
// of a trend), which say nothing past the end. Far queries inside the
// range take the readout of every far block row.
type edgeModel struct {
	inv    []float64   // ARD inverse length scales at bandwidth 1
	spread float64     // nearQuantile of the context rows' nearest-row distances
	lo, hi []float64   // the context's range of each column
	beyond *farReadout // for queries outside [lo, hi]; nil: no far readout
	gap    *farReadout // for far queries inside it
	lean   float64     // the forest's share for queries inside [lo, hi] (lean.go)
}

// farReadout is a far readout's weights; the context mean takes the
// weight they leave. Besides the trend as Fit uses it near the context
// (a quadratic continued along its tangent past the range), a far readout
// may weigh two other ways of carrying the trend past the context's range,
// chosen like the rest on the context's own blocks: the raw polynomial
// (a curving trend that goes on curving, co2's) and the trend held at the
// range's edge (flat past it: what a tree ensemble does, for a relation
// that does not go on). Inside the range all three are the same.
type farReadout struct {
	trendW  float64
	rawW    float64 // the trend's polynomial, without the tangent past the range
	flatW   float64 // the trend at the query clamped to the context's range
	w       [][headsPerLayer]float64
	forestW float64
}

// trendVariants are the trend's other continuations past the range [lo,
// hi] at z: the raw polynomial and the trend at z clamped to the range.
func trendVariants(t *trend, z, lo, hi []float64) (raw, flat float64) {
	if t.beta == nil {
		return 0, 0
	}
	raw = dot(t.beta, t.expand(z, nil))
	zc := make([]float64, len(z))
	for d, v := range z {
		zc[d] = min(max(v, lo[d]), hi[d])
	}
	return raw, t.eval(zc, nil)
}

// primal is the near and the far readouts' parts at the standardised
// query q of edges (nil: no far readout) that are not heads: the trend,
// whose value at z is tv, its continuations and the forest.
func (c *contextFit) primal(edges []queryEdge, q int, z []float64, tv float64) (near, far float64) {
	var fv float64
	if c.fo != nil {
		fv = c.fo.predict(z)
	}
	near = c.trendW*tv + c.forestW*fv
	if edges == nil || edges[q].u <= 0 {
		return near, 0
	}
	r := c.farFor(edges[q])
	far = r.trendW*tv + r.forestW*fv
	if r.rawW != 0 || r.flatW != 0 {
		raw, flat := trendVariants(c.tr, z, c.edge.lo, c.edge.hi)
		far += r.rawW*raw + r.flatW*flat
	}
	return near, far
}

// weights is the readout as one weight per candidate (heldOut's order; the
// mean's weight left out).
func (r *farReadout) weights() []float64 {
	w := []float64{r.trendW}
	for _, l := range r.w {
		w = append(w, l[:]...)
	}
	return append(w, r.forestW)
}

// minFarRows is the fewest block rows a far readout is chosen on: with
// fewer far rows the pooled readout is chosen on every block row, and with
// fewer beyond rows the beyond readout is the pooled one.
const minFarRows = 30

// fitFar chooses the far readouts on blk's far rows (indices into blk):
// the pooled readout on all of them, for gaps, and the beyond readout on
// those outside the range of the blocks they were predicted from.
func (e *edgeModel) fitFar(cfg modelConfig, blk *heldOut, far []int, init int) {
	all := far
	if len(all) < minFarRows {
		all = nil
		for a := range blk.target {
			all = append(all, a)
		}
	}
	var beyond, gap []int
	for _, a := range far {
		if blk.beyond[a] {
			beyond = append(beyond, a)
		} else {
			gap = append(gap, a)
		}
	}
	pooled := selectFar(cfg, blk, all, init)
	if pooled == nil {
		return
	}
	e.beyond, e.gap = pooled, pooled
	if len(beyond) >= minFarRows {
		if own := selectFar(cfg, blk, beyond, init); own != nil {
			e.beyond = own
		}
	}
}

// selectFar chooses a far readout on blk's rows: in each block apart, then
// averaged, so that no one run decides for the others, since a query's
// may be like any of them. Its candidates are the trend (and its raw and
// flat continuations), the heads, the forest and the context mean (the
// weight left over). Nil when no block holds 8 of the
// rows.
func selectFar(cfg modelConfig, blk *heldOut, rows []int, init int) *farReadout {
	nc := len(blk.cands)
	w := make([]float64, nc+3)
	blocks := 0
	for b := range blockCV {
		var in []int
		for _, a := range rows {
			if blk.block[a] == b {
				in = append(in, a)
			}
		}
		if len(in) < 8 {
			continue
		}
		sub := blk.subset(in)
		cands := append(append(append([][]float64(nil), sub.cands...), sub.extra[:]...), make([]float64, len(in))) // the mean: 0 once standardised
		for k, v := range baggedSelect(cands, sub.target, cfg.bags, init, 30) {
			w[k] += v
		}
		blocks++
	}
	if blocks == 0 {
		return nil
	}
	r := &farReadout{trendW: w[0] / float64(blocks), rawW: w[nc] / float64(blocks), flatW: w[nc+1] / float64(blocks),
		w: make([][headsPerLayer]float64, (nc-2)/headsPerLayer), forestW: w[nc-1] / float64(blocks)}
	for k := 1; k < nc-1; k++ {
		r.w[(k-1)/headsPerLayer][(k-1)%headsPerLayer] = w[k] / float64(blocks)
	}
	return r
}

// nearQuantile sets spread: a query as far from the context as the
// context's rows typically lie from each other (up to this quantile) is
// near.
const nearQuantile = 0.9

// farRatio is the distance, in spreads, at which a query is wholly far:
// u = ln(r)/ln(farRatio) for r spreads, clamped to [0, 1].
const farRatio = 4

// farness maps a distance in spreads to the far readout's share.
func farness(r float64) float64 {
	if !(r > 1) {
		return 0
	}
	return min(math.Log(r)/math.Log(farRatio), 1)
}

// queryEdge is one query's place relative to the context.
type queryEdge struct {
	dist    float64 // distance to the nearest context row, in spreads
	u       float64 // the far readout's share
	beyond  bool    // outside the context's range in a column
	outside bool    // beyond, or far from every row (dist ≥ farOutside)
}

// nearestSq is the squared ARD distance from x to the nearest row of z
// (n×f) other than skip (−1: none).
func nearestSq(z []float64, n, f int, x, inv []float64, skip int) float64 {
	best := math.Inf(1)
	for j := range n {
		if j == skip {
			continue
		}
		best = min(best, sqDist(x, z[j*f:(j+1)*f], inv))
	}
	return best
}

// newEdgeModel measures the context's spread on up to 1,024 of its rows.
func (c *contextFit) newEdgeModel(ctx context.Context, ard gpHyper) (*edgeModel, error) {
	n, f := c.n, c.f
	e := &edgeModel{inv: metricInv(ard, 1)}
	e.lo, e.hi = columnRanges(c.z, n, f)
	rows := scoreRows(n, 1024)
	d := make([]float64, len(rows))
	if err := parallelFor(ctx, len(rows), 64, func(lo, hi int) {
		for a := lo; a < hi; a++ {
			i := rows[a]
			d[a] = math.Sqrt(nearestSq(c.z, n, f, c.z[i*f:(i+1)*f], e.inv, i))
		}
	}); err != nil {
		return nil, err
	}
	slices.Sort(d)
	e.spread = d[min(int(nearQuantile*float64(len(d))), len(d)-1)]
	if !(e.spread > 0) {
		// Rows on a lattice of duplicates: any distance is far.
		e.spread = math.SmallestNonzeroFloat64
	}
	return e, nil
}

// edgeOf places one standardised query.
func (c *contextFit) edgeOf(x []float64) queryEdge {
	e := c.edge
	var q queryEdge
	q.dist = math.Sqrt(nearestSq(c.z, c.n, c.f, x, e.inv, -1)) / e.spread
	if e.beyond != nil {
		q.u = farness(q.dist)
	}
	q.beyond = outsideBox(x, e.lo, e.hi)
	q.outside = q.beyond || q.dist >= farOutside
	return q
}

// queryEdges places each of the nq standardised queries zq (nil for a
// constant model).
func (c *contextFit) queryEdges(ctx context.Context, zq []float64, nq int) ([]queryEdge, error) {
	if c.edge == nil {
		return nil, ctx.Err()
	}
	f := c.f
	out := make([]queryEdge, nq)
	err := parallelFor(ctx, nq, 16, func(lo, hi int) {
		for q := lo; q < hi; q++ {
			out[q] = c.edgeOf(zq[q*f : (q+1)*f])
		}
	})
	return out, err
}

// outsideBox says whether x lies outside [lo, hi] in a column.
func outsideBox(x, lo, hi []float64) bool {
	for d, v := range x {
		if v < lo[d] || v > hi[d] {
			return true
		}
	}
	return false
}

// farFor is the far readout for a query placed at q (nil when Fit learnt
// none).
func (c *contextFit) farFor(q queryEdge) *farReadout {
	if c.edge == nil {
		return nil
	}
	if q.beyond {
		return c.edge.beyond
	}
	return c.edge.gap
}
