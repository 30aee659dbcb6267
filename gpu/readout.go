package gpu

import (
	"math"
	"slices"
)

// rowDists is one query's squared distances to the context rows in one
// metric at bandwidth 1, with row skip (−1: none) left out, and, once a
// head asks, its nearest rows in (distance, row) order: every local and
// top-k head of the metric reads its neighbours from them instead of
// selecting again, and every smooth head its nearest distance.
type rowDists struct {
	base []float64
	skip int
	near []float64 // the smallest of base without skip, ascending by (distance, row)
	rows []int     // near's rows
	sel  []float64 // scratch, len(base)
	top  []int     // scratch for a top-k head's rows
}

func newRowDists(n int) *rowDists {
	return &rowDists{base: make([]float64, n), sel: make([]float64, n)}
}

// reset starts a new query: base is filled by the caller.
func (r *rowDists) reset(skip int) { r.skip, r.near, r.rows = skip, r.near[:0], r.rows[:0] }

// left is the number of rows the query sees (all but skip).
func (r *rowDists) left() int {
	if r.skip >= 0 {
		return len(r.base) - 1
	}
	return len(r.base)
}

// kth is the k-th smallest distance (1-based, at most the rows left in).
func (r *rowDists) kth(k int) float64 {
	if k > len(r.near) {
		r.selectNear(k)
		if k > len(r.near) {
			return math.NaN()
		}
	}
	return r.near[k-1]
}

// selectNear keeps the max(k, 64) nearest rows in (distance, row) order:
// the threshold t is the kk-th smallest distance (a selection on the
// values), and every row nearer than t is among them.
func (r *rowDists) selectNear(k int) {
	kk := min(max(k, 64), r.left())
	t := r.kthValue(kk)
	// The rows nearer than t, in (distance, row) order, then the first
	// rows at t in row order up to kk: many rows can tie at t (repeated
	// values), and only the lowest of them belong.
	r.near, r.rows, r.top = r.near[:0], r.rows[:0], r.top[:0]
	for j, v := range r.base {
		if j == r.skip || v > t {
			continue
		}
		if v == t {
			if len(r.top) < kk {
				r.top = append(r.top, j)
			}
			continue
		}
		// Fewer than kk rows are nearer than t (unless a NaN misled the
		// selection): an insertion sort, in which a row goes after every
		// row of its distance (they came first), keeps them in
		// (distance, row) order.
		if len(r.near) == kk {
			continue
		}
		r.near, r.rows = append(r.near, v), append(r.rows, j)
		c := len(r.near) - 1
		for ; c > 0 && r.near[c-1] > v; c-- {
			r.near[c], r.rows[c] = r.near[c-1], r.rows[c-1]
		}
		r.near[c], r.rows[c] = v, j
	}
	// Only a NaN distance (which no comparison places) leaves fewer than
	// kk rows; kth then answers NaN.
	for _, j := range r.top[:min(kk-len(r.rows), len(r.top))] {
		r.near, r.rows = append(r.near, t), append(r.rows, j)
	}
}

// kthValue is the kk-th smallest distance (1 ≤ kk ≤ the rows left in).
// The selection runs on the rows within a bound, not on all of them: the
// minima of kk groups (rows j ≡ q mod kk) are kk distinct rows, so the
// largest of them is at least the kk-th smallest; on a large context few
// rows lie within it.
func (r *rowDists) kthValue(kk int) float64 {
	n := len(r.base)
	m := 0
	if n >= 4*kk {
		gm := r.sel[n-kk:] // the group minima, read before rows are copied over them
		for q := range gm {
			gm[q] = math.Inf(1)
		}
		q := 0
		for j, v := range r.base {
			if j != r.skip {
				gm[q] = min(gm[q], v)
			}
			if q++; q == kk {
				q = 0
			}
		}
		bound := slices.Max(gm)
		if bound < math.Inf(1) {
			for j, v := range r.base {
				if v <= bound && j != r.skip {
					r.sel[m] = v
					m++
				}
			}
		}
	}
	if m < kk {
		// A small context or an infinite bound: all rows.
		m = 0
		for j, v := range r.base {
			if j != r.skip {
				r.sel[m] = v
				m++
			}
		}
	}
	return kthSmallest(r.sel[:m], kk-1)
}

// topMean is the mean of v over the k nearest rows (ties to the lower
// row), summed in row order: knnMean's bits on the unscaled distances,
// from the shared neighbour list.
func (r *rowDists) topMean(v []float64, k int) float64 {
	k = min(k, r.left())
	if k <= 0 {
		return 0
	}
	r.kth(k)
	r.top = append(r.top[:0], r.rows[:min(k, len(r.rows))]...)
	slices.Sort(r.top)
	var s float64
	for _, j := range r.top {
		s += v[j]
	}
	return s / float64(k)
}

// farExp is where a weight e^−x is left out of a head's sums: x > 40 is a
// weight below 4·10⁻¹⁸ of the head's largest, which moves its output by
// less than rows × 10⁻¹⁷ relative and saves the exp for most rows.
const farExp = 40

// headOutput64 is a head's output in float64 for a query whose distances
// are rd; the head's bandwidth multiple is applied here. buf is scratch of
// at least 2·len(rd.base). Weights are expNeg's (expScaled, a whole row at
// a time), within 1e-9 relative of math.Exp's. Leaving out rd's
// row gives the leave-one-out prediction of a context row. Fitting uses it
// to score heads; predictions go through the KV cache.
//
// Scaling by s is monotone in floating point, so the nearest scaled
// distance is the nearest distance scaled, and at s = 1 (every top-k head)
// the scaled distances are the distances: both come from rd's shared
// neighbours with the bits of a scan of the scaled row.
func headOutput64(h *head, rd *rowDists, buf []float64) float64 {
	n := len(rd.base)
	d2, w := rd.base, buf[n:2*n]
	s := 1 / (h.spec.mult * h.spec.mult)
	skip := rd.skip
	if s != 1 {
		d2 = buf[:n]
		for j, v := range rd.base {
			d2[j] = v * s
		}
	}
	switch h.spec.kind {
	case kindSolve:
		expScaled(w, d2, -0.5, 0)
		var out float64
		for j := range d2 {
			if j != skip {
				out += h.sf2 * w[j] * h.values[j]
			}
		}
		return out
	case kindSmooth:
		dmin := math.Inf(1)
		if rd.left() > 0 {
			dmin = rd.kth(1) * s
		}
		expScaled(w, d2, -0.5, dmin)
		var num, den float64
		for j, v := range d2 {
			if j != skip && v-dmin <= 2*farExp {
				num += w[j] * h.values[j]
				den += w[j]
			}
		}
		if den == 0 {
			return 0
		}
		return num / den
	case kindLocal:
		m := rd.left()
		if m <= 0 {
			return 0
		}
		return localMean(d2, h.values, rd.kth(min(h.spec.k, m))*s, skip, w)
	default: // kindTopK
		if s == 1 {
			return rd.topMean(h.values, h.spec.k)
		}
		return knnMean(d2, h.values, h.spec.k, skip)
	}
}

// layerOutputs64 calls put(h, v) with the output v of every head h of the
// layer (solve heads too unless skipSolve), with dA and dI the query's
// distances in each metric and buf scratch of at least 2·len(dA.base).
// Scoring two smooth or two local heads of a metric in one pass (their
// row-order sums are dependent chains, which could overlap) measured no
// gain in Fit's CPU (BENCHMARKS.md, "Readout, third session").
func layerOutputs64(ls *[headsPerLayer]head, dA, dI *rowDists, buf []float64, skipSolve bool, put func(h int, v float64)) {
	for h := range ls {
		hd := &ls[h]
		if skipSolve && hd.spec.kind == kindSolve {
			continue
		}
		rd := dA
		if hd.spec.metric == metricISO {
			rd = dI
		}
		put(h, headOutput64(hd, rd, buf))
	}
}

// rowSqDists sets dA and dI to sqDist's bits from the point x to every
// row, in the metrics invA and invI, with zt the rows feature by feature
// (transpose): a feature's pass over the rows is a vector loop
// (sqDistScaledAcc) where a row's loop over eight features was not.
func rowSqDists(dA, dI, zt, x, invA, invI []float64) {
	n := len(dA)
	clear(dA)
	clear(dI)
	for d, c := range x {
		col := zt[d*n : (d+1)*n]
		sqDistScaledAcc(dA, col, c, invA[d])
		sqDistScaledAcc(dI, col, c, invI[d])
	}
}
