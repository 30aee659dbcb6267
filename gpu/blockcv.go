package gpu

import (
	"context"
	"math"
)

// heldOut is every readout candidate's prediction of context rows it did
// not see: cands[k][a] for row rows[a] (canonical order), whose target is
// target[a]; k = 0 is the trend, 1 + l·H + h head h of layer l, and the
// last the forest.
type heldOut struct {
	cands  [][]float64
	target []float64
	rows   []int
	// dist is, for rows held out in blocks, the distance from the row to
	// the nearest row the candidates were fitted on, in spreads (edge.go);
	// nil for scattered rows.
	dist []float64
	// block is the held-out block of each row, and beyond whether it lies
	// outside the range of the rows it was predicted from (nil for
	// scattered rows).
	block  []int
	beyond []bool
	// extra is, for rows held out in blocks, the trend's raw and flat
	// continuations past the range of the rows it was fitted on
	// (trendVariants); far readouts weigh them too.
	extra [2][]float64
}

// subset is the rows idx of h.
func (h *heldOut) subset(idx []int) *heldOut {
	out := &heldOut{cands: make([][]float64, len(h.cands))}
	for k := range h.cands {
		out.cands[k] = pick(h.cands[k], idx)
	}
	out.target = pick(h.target, idx)
	for _, a := range idx {
		out.rows = append(out.rows, h.rows[a])
		if h.dist != nil {
			out.dist = append(out.dist, h.dist[a])
			out.block = append(out.block, h.block[a])
			out.beyond = append(out.beyond, h.beyond[a])
		}
		for k := range h.extra {
			if h.extra[k] != nil {
				out.extra[k] = append(out.extra[k], h.extra[k][a])
			}
		}
	}
	return out
}

// blendFar is, for each row held out in blocks, the far readout r's
// prediction.
func (h *heldOut) blendFar(r *farReadout) []float64 {
	out := h.blend(r.weights())
	for a := range out {
		out[a] += r.rawW*h.extra[0][a] + r.flatW*h.extra[1][a]
	}
	return out
}

// join is h's rows then o's (their distances are dropped).
func (h *heldOut) join(o *heldOut) *heldOut {
	out := &heldOut{cands: make([][]float64, len(h.cands))}
	for k := range h.cands {
		out.cands[k] = append(append([]float64(nil), h.cands[k]...), o.cands[k]...)
	}
	out.target = append(append([]float64(nil), h.target...), o.target...)
	out.rows = append(append([]int(nil), h.rows...), o.rows...)
	return out
}

// blend is, for each row, the candidates weighted by w (one weight per
// candidate; candidates past len(w) weigh 0).
func (h *heldOut) blend(w []float64) []float64 {
	out := make([]float64, len(h.target))
	for k, wk := range w {
		if wk == 0 {
			continue
		}
		for a, v := range h.cands[k] {
			out[a] += wk * v
		}
	}
	return out
}

func pick(v []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for a, i := range idx {
		out[a] = v[i]
	}
	return out
}

// blockCV is how many contiguous blocks of the context, in the order its
// rows were given, the block cross-validation holds out in turn.
const blockCV = 5

// blockCVRows caps the rows the block cross-validation uses: a larger
// context is thinned to this many rows spread over it, in order.
const blockCVRows = 2000

// blockCandidates is the trend's and each head's prediction of the rows of
// each contiguous block of the context (in the order the rows were given)
// from the heads rebuilt on the other blocks with the context's
// hyperparameters: how well each extrapolates into a run of missing rows,
// which leave-one-out on scattered rows cannot tell when neighbouring rows
// are alike (a time series). Rows given in no particular order make
// blocks that are scattered rows like any others. Nil when the context has
// too few rows for blocks. It stops with an error wrapping ctx.Err() once
// ctx ends.
func (c *contextFit) blockCandidates(ctx context.Context, cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int) (*heldOut, error) {
	n := c.n
	pos := make([]int, n) // canonical index of the context's i-th row
	for k, i := range c.order {
		pos[i] = k
	}
	var rows []int
	for _, i := range scoreRows(n, blockCVRows) {
		rows = append(rows, pos[i])
	}
	m := len(rows)
	if m < 4*blockCV {
		return nil, nil
	}
	// The blocks' solve heads use experts of the size the context's do
	// (heads.go: they shrink past largeSolveRows), so the blocks score the
	// solve heads as they are fitted, at the same cost per row.
	if n > largeSolveRows {
		solveChunk = (n + solveExperts(n, solveChunk) - 1) / solveExperts(n, solveChunk)
	}
	nh := len(c.layers) * headsPerLayer
	h := &heldOut{cands: make([][]float64, nh+2), rows: rows, dist: make([]float64, m), block: make([]int, m), beyond: make([]bool, m)}
	h.extra = [2][]float64{make([]float64, m), make([]float64, m)}
	for k := range h.cands {
		h.cands[k] = make([]float64, m)
	}
	// The blocks are independent and each writes only its own rows
	// [a0, a1) of h, so they run at once, each on a core (the GP solves
	// and held-out rows within one take the cores left free); the first
	// error in the blocks' order is the one returned.
	errs := make([]error, blockCV)
	blocks := make([]func(), blockCV)
	for b := range blockCV {
		blocks[b] = func() { errs[b] = c.heldOutBlock(ctx, cfg, ys, ard, iso, solveChunk, h, b) }
	}
	if err := parallelDo(ctx, blocks...); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	h.target = make([]float64, m)
	for a, k := range rows {
		h.target[a] = ys[k]
		h.dist[a] = math.Sqrt(h.dist[a]) / c.edge.spread
	}
	return h, nil
}

// heldOutBlock fills block b's rows of h: every candidate's prediction of
// them from the rest of h's rows, their squared distance to the nearest of
// those, whether they lie beyond their box, and the trend's variants.
func (c *contextFit) heldOutBlock(ctx context.Context, cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int, h *heldOut, b int) error {
	rows, m := h.rows, len(h.rows)
	a0, a1 := b*m/blockCV, (b+1)*m/blockCV
	tr := append(append([]int(nil), rows[:a0]...), rows[a1:]...)
	te := rows[a0:a1]
	zt, yt := c.rowsOf(tr, ys)
	trd, err := c.heldOutPredict(ctx, cfg, zt, yt, te, ard, iso, solveChunk, h.dist[a0:a1], func(k, a int, v float64) { h.cands[k][a0+a] = v })
	if err != nil {
		return err
	}
	lo, hi := columnRanges(zt, len(tr), c.f)
	for a := a0; a < a1; a++ {
		h.block[a] = b
		i := rows[a]
		zi := c.z[i*c.f : (i+1)*c.f]
		h.beyond[a] = outsideBox(zi, lo, hi)
		h.extra[0][a], h.extra[1][a] = trendVariants(trd, zi, lo, hi)
	}
	return nil
}
