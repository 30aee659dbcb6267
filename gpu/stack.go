package gpu

import (
	"math"
)

// headOutput64 is a head's output in float64 for a query whose squared
// distances to the context rows, in the head's metric at bandwidth 1, are
// d2base; the head's bandwidth multiple is applied here. Row skip (−1: none)
// is left out, which gives the leave-one-out prediction of a context row.
// Fitting uses it to score heads; predictions go through the KV cache.
func headOutput64(h *head, d2base, d2, sel []float64, skip int) float64 {
	s := 1 / (h.spec.mult * h.spec.mult)
	for j, v := range d2base {
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
			if j != skip {
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
		m := 0
		for j, v := range d2 {
			if j != skip {
				sel[m] = v
				m++
			}
		}
		if m == 0 {
			return 0
		}
		h2 := kthSmallest(sel[:m], min(h.spec.k, m)-1)
		return localMean(d2, h.values, h2, skip)
	default: // kindTopK
		return knnMean(d2, h.values, h.spec.k, skip)
	}
}

// stack chooses the readout weights over the trend and every head by how
// well each predicts context rows it did not see. On a small context it uses
// k-fold predictions with the hyperparameters refit in every fold, because
// leave-one-out after tuning on the same rows flatters the tuned heads.
func (c *contextFit) stack(cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int, score []bool) {
	n, f := c.n, c.f
	var cands [][]float64
	var target []float64
	// Sorted initialisation of the ensemble selection: the number of best
	// heads blended before greedy steps. Small contexts blend more, since
	// their out-of-fold scores are noisy and a broad average is safer.
	init := 5
	if n <= cfg.foldRows && n >= 10 {
		init = 24
		cands, target = c.foldCandidates(cfg, ys, solveChunk)
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
		hc := c.looCandidates(rows, ard, iso)
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
func (c *contextFit) looCandidates(rows []int, ard, iso gpHyper) [][]float64 {
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
	parallelFor(len(rows), 8, func(lo, hi int) {
		dA, dI := make([]float64, n), make([]float64, n)
		d2, sel := make([]float64, n), make([]float64, n)
		for a := lo; a < hi; a++ {
			i := rows[a]
			zi := c.z[i*f : (i+1)*f]
			for j := range n {
				zj := c.z[j*f : (j+1)*f]
				dA[j] = sqDist(zi, zj, invA)
				dI[j] = sqDist(zi, zj, invI)
			}
			for l := range c.layers {
				for h := range c.layers[l] {
					hd := &c.layers[l][h]
					if hd.spec.kind == kindSolve {
						continue
					}
					base := dA
					if hd.spec.metric == metricISO {
						base = dI
					}
					out[l*headsPerLayer+h][a] = headOutput64(hd, base, d2, sel, i)
				}
			}
		}
	})
	return out
}

// foldCandidates is the trend's and each head's prediction of every row from
// a model fitted, hyperparameters included, on the other folds.
func (c *contextFit) foldCandidates(cfg modelConfig, ys []float64, solveChunk int) ([][]float64, []float64) {
	folds := max(cfg.folds, 2)
	nh := len(c.layers) * headsPerLayer
	out := make([][]float64, nh+1)
	for k := range out {
		out[k] = make([]float64, c.n)
	}
	// Folds are independent and each writes only its own rows of out, so
	// they run in parallel without changing a bit.
	parallelFor(folds, 1, func(lo, hi int) {
		for fo := lo; fo < hi; fo++ {
			c.foldPredict(cfg, ys, solveChunk, folds, fo, out)
		}
	})
	return out, ys
}

// foldPredict fills out's rows of fold fo (rows i ≡ fo mod folds) from a
// model fitted, hyperparameters included, on the other folds.
func (c *contextFit) foldPredict(cfg modelConfig, ys []float64, solveChunk, folds, fo int, out [][]float64) {
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
	ard := fitGP(zt, m, f, yt, cfg.gp)
	iso := ard
	if cfg.isoGP {
		iso = fitGPIso(zt, m, f, yt, cfg.gp)
	}
	layers := buildHeads(cfg, zt, m, f, yt, ard, iso, solveChunk, nil)
	trd, _, _ := fitTrend(zt, m, f, yt)
	invA, invI := metricInv(ard, 1), metricInv(iso, 1)
	dA, dI := make([]float64, m), make([]float64, m)
	d2, sel := make([]float64, m), make([]float64, m)
	var buf []float64
	for _, i := range te {
		zi := c.z[i*f : (i+1)*f]
		out[0][i] = trd.eval(zi, buf)
		for j := range m {
			zj := zt[j*f : (j+1)*f]
			dA[j] = sqDist(zi, zj, invA)
			dI[j] = sqDist(zi, zj, invI)
		}
		for l := range layers {
			for h := range layers[l] {
				hd := &layers[l][h]
				base := dA
				if hd.spec.metric == metricISO {
					base = dI
				}
				out[1+l*headsPerLayer+h][i] = headOutput64(hd, base, d2, sel, -1)
			}
		}
	}
}
