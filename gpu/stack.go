package gpu

import (
	"context"
	"errors"
	"math"
	"slices"
)

// rowDists is one query's squared distances to the context rows in one
// metric at bandwidth 1, with row skip (−1: none) left out, and, once a
// local head asks, its nearest distances sorted: every local head of the
// metric reads its k-th nearest from them instead of selecting again.
type rowDists struct {
	base []float64
	skip int
	near []float64 // the smallest of base without skip, ascending
	sel  []float64 // scratch, len(base)
}

func newRowDists(n int) *rowDists {
	return &rowDists{base: make([]float64, n), sel: make([]float64, n)}
}

// reset starts a new query: base is filled by the caller.
func (r *rowDists) reset(skip int) { r.skip, r.near = skip, r.near[:0] }

// kth is the k-th smallest distance (1-based, at most the rows left in).
func (r *rowDists) kth(k int) float64 {
	if k > len(r.near) {
		m := 0
		for j, v := range r.base {
			if j != r.skip {
				r.sel[m] = v
				m++
			}
		}
		kk := min(max(k, 64), m)
		kthSmallest(r.sel[:m], kk-1) // the kk smallest now lead sel
		r.near = append(r.near[:0], r.sel[:kk]...)
		slices.Sort(r.near)
	}
	return r.near[k-1]
}

// farExp is where a weight e^−x is left out of a head's sums: x > 40 is a
// weight below 4·10⁻¹⁸ of the head's largest, which moves its output by
// less than rows × 10⁻¹⁷ relative and saves the exp for most rows.
const farExp = 40

// headOutput64 is a head's output in float64 for a query whose distances
// are rd; the head's bandwidth multiple is applied here. Leaving out rd's
// row gives the leave-one-out prediction of a context row. Fitting uses it
// to score heads; predictions go through the KV cache.
func headOutput64(h *head, rd *rowDists, d2 []float64) float64 {
	s := 1 / (h.spec.mult * h.spec.mult)
	skip := rd.skip
	for j, v := range rd.base {
		d2[j] = v * s
	}
	switch h.spec.kind {
	case kindSolve:
		var out float64
		for j, v := range d2 {
			if j != skip {
				out += h.sf2 * math.Exp(-0.5*v) * h.values[j]
			}
		}
		return out
	case kindSmooth:
		dmin := math.Inf(1)
		for j, v := range d2 {
			if j != skip {
				dmin = min(dmin, v)
			}
		}
		var num, den float64
		for j, v := range d2 {
			if j != skip && v-dmin <= 2*farExp {
				w := math.Exp(-0.5 * (v - dmin))
				num += w * h.values[j]
				den += w
			}
		}
		if den == 0 {
			return 0
		}
		return num / den
	case kindLocal:
		m := len(d2)
		if skip >= 0 {
			m--
		}
		if m <= 0 {
			return 0
		}
		return localMean(d2, h.values, rd.kth(min(h.spec.k, m))*s, skip)
	default: // kindTopK
		return knnMean(d2, h.values, h.spec.k, skip)
	}
}

// stack chooses the readout weights over the trend and every head by how
// well each predicts context rows it did not see. On a small context it uses
// k-fold predictions with the hyperparameters refit in every fold, because
// leave-one-out after tuning on the same rows flatters the tuned heads.
// It stops with an error wrapping ctx.Err() once ctx ends.
func (c *contextFit) stack(ctx context.Context, cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int, score []bool) error {
	n, f := c.n, c.f
	var cands [][]float64
	var target []float64
	// Sorted initialisation of the ensemble selection: the number of best
	// heads blended before greedy steps. Small contexts blend more, since
	// their out-of-fold scores are noisy and a broad average is safer.
	init := 5
	if n <= cfg.foldRows && n >= 10 {
		init = 24
		var err error
		if cands, target, err = c.foldCandidates(ctx, cfg, ys, solveChunk); err != nil {
			return err
		}
		tr, _, _ := fitTrend(c.z, n, f, ys)
		c.tr = tr
	} else {
		var rows []int
		for i, s := range score {
			if s {
				rows = append(rows, i)
			}
		}
		tr, tLoo, _ := fitTrend(c.z, n, f, ys)
		c.tr = tr
		target = make([]float64, len(rows))
		tc := make([]float64, len(rows))
		for a, i := range rows {
			target[a] = ys[i]
			tc[a] = tLoo[i]
		}
		cands = append(cands, tc)
		hc, err := c.looCandidates(ctx, rows, ard, iso)
		if err != nil {
			return err
		}
		// Heads in the fitted ARD metric carry the optimism of
		// hyperparameters tuned on these rows: inflate their residuals by
		// the AIC-like factor 1 + 2p/n (p = f+2 hyperparameters).
		pen := math.Sqrt(1 + 2*float64(f+2)/float64(n))
		k := 0
		for l := range c.layers {
			for h := range c.layers[l] {
				if c.layers[l][h].spec.metric == metricARD {
					for a := range hc[k] {
						hc[k][a] = target[a] + (hc[k][a]-target[a])*pen
					}
				}
				k++
			}
		}
		cands = append(cands, hc...)
	}
	w := baggedSelect(cands, target, cfg.bags, init, 30)
	c.trendW = w[0]
	k := 1
	for l := range c.layers {
		for h := range c.layers[l] {
			c.layers[l][h].w = w[k]
			k++
		}
	}
	return nil
}

// stackPairs bounds scored rows × context rows in the readout's scoring.
const stackPairs = 100_000_000

// scoreRows is every row, or a fixed spread-out sample of k rows in order.
func scoreRows(n, k int) []int {
	rows := spreadSample(n, k)
	if len(rows) < n {
		// keep canonical order so per-row work is laid out predictably
		mark := make([]bool, n)
		for _, i := range rows {
			mark[i] = true
		}
		rows = rows[:0]
		for i, m := range mark {
			if m {
				rows = append(rows, i)
			}
		}
	}
	return rows
}

// scoreMask marks the rows the readout is scored on (nil on the k-fold
// path). Scoring costs scored rows × n; past stackPairs the number of scored
// rows shrinks (not below 1024), keeping Fit linear in n.
func (c *contextFit) scoreMask(cfg modelConfig) []bool {
	n := c.n
	if n <= cfg.foldRows && n >= 10 {
		return nil
	}
	score := make([]bool, n)
	for _, i := range scoreRows(n, min(cfg.stackRows, max(1024, stackPairs/n))) {
		score[i] = true
	}
	return score
}

// looCandidates is each head's leave-one-out prediction on the scored rows.
func (c *contextFit) looCandidates(ctx context.Context, rows []int, ard, iso gpHyper) ([][]float64, error) {
	n, f := c.n, c.f
	nh := len(c.layers) * headsPerLayer
	out := make([][]float64, nh)
	for k := range out {
		out[k] = make([]float64, len(rows))
	}
	// Closed-form LOO for the solve heads, from their solve in buildHeads.
	for l := range c.layers {
		for h := range c.layers[l] {
			hd := &c.layers[l][h]
			if hd.spec.kind != kindSolve {
				continue
			}
			for a, i := range rows {
				out[l*headsPerLayer+h][a] = hd.loo[i]
			}
			hd.loo = nil
		}
	}
	invA, invI := metricInv(ard, 1), metricInv(iso, 1)
	err := parallelFor(ctx, len(rows), 8, func(lo, hi int) {
		dA, dI := newRowDists(n), newRowDists(n)
		d2 := make([]float64, n)
		for a := lo; a < hi; a++ {
			i := rows[a]
			zi := c.z[i*f : (i+1)*f]
			dA.reset(i)
			dI.reset(i)
			for j := range n {
				zj := c.z[j*f : (j+1)*f]
				dA.base[j] = sqDist(zi, zj, invA)
				dI.base[j] = sqDist(zi, zj, invI)
			}
			for l := range c.layers {
				for h := range c.layers[l] {
					hd := &c.layers[l][h]
					if hd.spec.kind == kindSolve {
						continue
					}
					rd := dA
					if hd.spec.metric == metricISO {
						rd = dI
					}
					out[l*headsPerLayer+h][a] = headOutput64(hd, rd, d2)
				}
			}
		}
	})
	return out, err
}

// foldCandidates is the trend's and each head's prediction of every row from
// a model fitted, hyperparameters included, on the other folds.
func (c *contextFit) foldCandidates(ctx context.Context, cfg modelConfig, ys []float64, solveChunk int) ([][]float64, []float64, error) {
	folds := max(cfg.folds, 2)
	nh := len(c.layers) * headsPerLayer
	out := make([][]float64, nh+1)
	for k := range out {
		out[k] = make([]float64, c.n)
	}
	// Folds are independent and each writes only its own rows of out, so
	// they run in parallel without changing a bit.
	errs := make([]error, folds)
	if err := parallelFor(ctx, folds, 1, func(lo, hi int) {
		for fo := lo; fo < hi; fo++ {
			errs[fo] = c.foldPredict(ctx, cfg, ys, solveChunk, folds, fo, out)
		}
	}); err != nil {
		return nil, nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return out, ys, nil
}

// foldPredict fills out's rows of fold fo (rows i ≡ fo mod folds) from a
// model fitted, hyperparameters included, on the other folds.
func (c *contextFit) foldPredict(ctx context.Context, cfg modelConfig, ys []float64, solveChunk, folds, fo int, out [][]float64) error {
	n, f := c.n, c.f
	var tr, te []int
	for i := range n {
		if i%folds == fo {
			te = append(te, i)
		} else {
			tr = append(tr, i)
		}
	}
	m := len(tr)
	zt := make([]float64, m*f)
	yt := make([]float64, m)
	for a, i := range tr {
		copy(zt[a*f:(a+1)*f], c.z[i*f:(i+1)*f])
		yt[a] = ys[i]
	}
	ard := fitGP(ctx, zt, m, f, yt, cfg.gp)
	iso := ard
	if cfg.isoGP {
		iso = fitGPIso(ctx, zt, m, f, yt, cfg.gp)
	}
	layers, err := buildHeads(ctx, cfg, zt, m, f, yt, ard, iso, solveChunk, nil)
	if err != nil {
		return err
	}
	trd, _, _ := fitTrend(zt, m, f, yt)
	invA, invI := metricInv(ard, 1), metricInv(iso, 1)
	dA, dI := newRowDists(m), newRowDists(m)
	d2 := make([]float64, m)
	var buf []float64
	for _, i := range te {
		zi := c.z[i*f : (i+1)*f]
		out[0][i] = trd.eval(zi, buf)
		dA.reset(-1)
		dI.reset(-1)
		for j := range m {
			zj := zt[j*f : (j+1)*f]
			dA.base[j] = sqDist(zi, zj, invA)
			dI.base[j] = sqDist(zi, zj, invI)
		}
		for l := range layers {
			for h := range layers[l] {
				hd := &layers[l][h]
				rd := dA
				if hd.spec.metric == metricISO {
					rd = dI
				}
				out[1+l*headsPerLayer+h][i] = headOutput64(hd, rd, d2)
			}
		}
	}
	return nil
}
