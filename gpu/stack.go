package gpu

import (
	"context"
	"errors"
	"math"
	"slices"
)

// minMixRows is the fewest block rows whose near ones join the near
// readout's selection: blocks of a smaller context are a few dozen rows
// each, predicted from a fifth fewer rows than the context has, and their
// errors are noise the scattered rows do not have.
const minMixRows = 200

// stack chooses the readout weights over the trend and every head by how
// well each predicts context rows it did not see. On a small context it uses
// k-fold predictions with the hyperparameters refit in every fold, because
// leave-one-out after tuning on the same rows flatters the tuned heads.
//
// Rows held out in contiguous blocks (blockCandidates) join them: those
// near the rest of the context (farness below ½; every other one, so that
// scattered rows still lead) in the near readout, the others choose the
// far readout (edge.go). The readouts' residuals on all of these rows
// calibrate the predictive distribution (interval.go). It stops with an
// error wrapping ctx.Err() once ctx ends.
func (c *contextFit) stack(ctx context.Context, cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int, score []bool) error {
	// The scattered rows' candidates and the blocks' share nothing they
	// write (nearCandidates sets c.tr and c.fo, the other c.edge), so they
	// run at once; errors are returned in the order they would come one
	// after another.
	var near, blk *heldOut
	var init int
	var nearErr, blkErr error
	if err := parallelDo(ctx, func() {
		near, init, nearErr = c.nearCandidates(ctx, cfg, ys, ard, iso, solveChunk, score)
	}, func() {
		if c.edge, blkErr = c.newEdgeModel(ctx, ard); blkErr == nil {
			blk, blkErr = c.blockCandidates(ctx, cfg, ys, ard, iso, solveChunk)
		}
	}); err != nil {
		return err
	}
	if nearErr != nil {
		return nearErr
	}
	if blkErr != nil {
		return blkErr
	}
	sel := near
	var blkNear, blkFar []int
	if blk != nil {
		for a, d := range blk.dist {
			if farness(d) < 0.5 {
				blkNear = append(blkNear, a)
			} else {
				blkFar = append(blkFar, a)
			}
		}
		var every []int
		for k, a := range blkNear {
			if k%2 == 0 {
				every = append(every, a)
			}
		}
		if len(blk.target) >= minMixRows {
			sel = near.join(blk.subset(every))
		}
	}
	w := baggedSelect(sel.cands, sel.target, cfg.bags, init, 30)
	c.trendW = w[0]
	k := 1
	for l := range c.layers {
		for h := range c.layers[l] {
			c.layers[l][h].w = w[k]
			k++
		}
	}
	c.forestW = w[k]
	if blk != nil {
		c.edge.fitFar(cfg, blk, blkFar, init)
		c.leanOnForest(near, blk)
	}
	for l := range c.layers {
		for h := range c.layers[l] {
			c.layers[l][h].linv = nil // the blocks are done with it
		}
	}
	return c.calibrate(ctx, near, blk)
}

// nearCandidates is every candidate's out-of-sample prediction of scattered
// context rows: leave-one-out on the scored rows, or k-fold with refit
// hyperparameters on a small context (with the larger sorted
// initialisation it returns). It also fits the trend.
func (c *contextFit) nearCandidates(ctx context.Context, cfg modelConfig, ys []float64, ard, iso gpHyper, solveChunk int, score []bool) (*heldOut, int, error) {
	n, f := c.n, c.f
	tr, tLoo, _ := fitTrend(c.z, n, f, ys)
	c.tr = tr
	oob := make([]float64, n)
	fo, err := fitForest(ctx, c.z, n, f, ys, oob)
	if err != nil {
		return nil, 0, err
	}
	c.fo = fo
	// Sorted initialisation of the ensemble selection: the number of best
	// heads blended before greedy steps. Small contexts blend more, since
	// their out-of-fold scores are noisy and a broad average is safer.
	if n <= cfg.foldRows && n >= 10 {
		cands, target, err := c.foldCandidates(ctx, cfg, ys, solveChunk)
		if err != nil {
			return nil, 0, err
		}
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		return &heldOut{cands: cands, target: target, rows: rows}, 24, nil
	}
	var rows []int
	for i, s := range score {
		if s {
			rows = append(rows, i)
		}
	}
	target := make([]float64, len(rows))
	tc := make([]float64, len(rows))
	for a, i := range rows {
		target[a] = ys[i]
		tc[a] = tLoo[i]
	}
	cands := [][]float64{tc}
	hc, err := c.looCandidates(ctx, rows, ard, iso)
	if err != nil {
		return nil, 0, err
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
	return &heldOut{cands: append(append(cands, hc...), pick(oob, rows)), target: target, rows: rows}, 5, nil
}

// stackPairs bounds scored rows × context rows in the readout's scoring:
// 500 scored rows at 10,000 context rows (the floor, 512, from 9,766). At
// 10k rows the scoring was 43% of Fit's CPU with 4,096 rows; 2,048 left R²
// on 2,000 synthetic queries within 10⁻⁵ (0.986619 → 0.986612) and cut
// Fit's wall time by a quarter. Down from 20,000,000 pairs to 5,000,000
// (and the floor from 1,024 to 512) the engine benchmark's table kept its
// R² at 6,000 and 10,000 rows (0.98133, 0.98074) and gained 4·10⁻⁵ at
// 15,000, with Fit's CPU down by a sixth. Contexts up to 2,236 rows (every
// evaluation table) score every row, as before.
const stackPairs = 5_000_000

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
// rows shrinks (not below 512), keeping Fit linear in n.
func (c *contextFit) scoreMask(cfg modelConfig) []bool {
	n := c.n
	if n <= cfg.foldRows && n >= 10 {
		return nil
	}
	score := make([]bool, n)
	for _, i := range scoreRows(n, min(cfg.stackRows, max(512, stackPairs/n))) {
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
	zt := transpose(c.z, n, f)
	err := parallelFor(ctx, len(rows), 8, func(lo, hi int) {
		dA, dI := newRowDists(n), newRowDists(n)
		d2 := make([]float64, 2*n)
		for a := lo; a < hi; a++ {
			i := rows[a]
			dA.reset(i)
			dI.reset(i)
			rowSqDists(dA.base, dI.base, zt, c.z[i*f:(i+1)*f], invA, invI)
			for l := range c.layers {
				layerOutputs64(&c.layers[l], dA, dI, d2, true, func(h int, v float64) { out[l*headsPerLayer+h][a] = v })
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
	out := make([][]float64, nh+2)
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
	var tr, te []int
	for i := range c.n {
		if i%folds == fo {
			te = append(te, i)
		} else {
			tr = append(tr, i)
		}
	}
	zt, yt := c.rowsOf(tr, ys)
	m := len(tr)
	ard := fitGP(ctx, zt, m, c.f, yt, cfg.gp)
	iso := ard
	if cfg.isoGP {
		iso = fitGPIso(ctx, zt, m, c.f, yt, cfg.gp)
	}
	_, err := c.heldOutPredict(ctx, cfg, zt, yt, te, ard, iso, solveChunk, nil, func(k, a int, v float64) { out[k][te[a]] = v })
	return err
}

// rowsOf copies the canonical rows idx of z and of y.
func (c *contextFit) rowsOf(idx []int, y []float64) ([]float64, []float64) {
	f := c.f
	zt := make([]float64, len(idx)*f)
	yt := make([]float64, len(idx))
	for a, i := range idx {
		copy(zt[a*f:(a+1)*f], c.z[i*f:(i+1)*f])
		yt[a] = y[i]
	}
	return zt, yt
}

// heldOutPredict fits the trend and every head on the rows (zt, yt) with
// the hyperparameters ard and iso, and calls put(k, a, v) with candidate
// k's prediction v of the held-out canonical row te[a] (k = 0 the trend,
// 1 + l·H + h head h of layer l, then the forest). It returns the trend it
// fitted on the rows.
func (c *contextFit) heldOutPredict(ctx context.Context, cfg modelConfig, zt, yt []float64, te []int, ard, iso gpHyper, solveChunk int, near []float64, put func(k, a int, v float64)) (*trend, error) {
	f := c.f
	m := len(yt)
	// The solve heads' predictions in closed form where they apply
	// (blocksolve.go); else the heads are rebuilt on the rows.
	solved, err := c.blockSolves(ctx, te, m, ard, iso, c.ys)
	if err != nil {
		return nil, err
	}
	layers, err := buildHeads(ctx, cfg, zt, m, f, yt, ard, iso, solveChunk, nil, solved == nil)
	if err != nil {
		return nil, err
	}
	trd, _, _ := fitTrend(zt, m, f, yt)
	fo, err := fitForest(ctx, zt, m, f, yt, nil)
	if err != nil {
		return nil, err
	}
	kf := 1 + len(layers)*headsPerLayer
	invA, invI := metricInv(ard, 1), metricInv(iso, 1)
	zc := transpose(zt, m, f)
	// Rows are independent and put writes each row's own slots.
	return trd, parallelFor(ctx, len(te), 8, func(lo, hi int) {
		dA, dI := newRowDists(m), newRowDists(m)
		d2 := make([]float64, 2*m)
		var buf []float64
		for a := lo; a < hi; a++ {
			zi := c.z[te[a]*f : (te[a]+1)*f]
			put(0, a, trd.eval(zi, buf))
			put(kf, a, fo.predict(zi))
			dA.reset(-1)
			dI.reset(-1)
			rowSqDists(dA.base, dI.base, zc, zi, invA, invI)
			if near != nil {
				near[a] = slices.Min(dA.base)
			}
			for l := range layers {
				layerOutputs64(&layers[l], dA, dI, d2, solved != nil, func(h int, v float64) { put(1+l*headsPerLayer+h, a, v) })
			}
			if solved != nil {
				for k, p := range solved {
					if p != nil {
						put(1+k, a, p[a])
					}
				}
			}
		}
	})
}
