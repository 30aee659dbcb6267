package gpu

import (
	"context"
	"slices"
)

// maxBlockSolveRows bounds the contexts whose solve heads keep L⁻¹ for the
// held-out blocks: n² floats per solve head (13 MB at 1,280 rows), kept
// only while Fit chooses the readout.
const maxBlockSolveRows = 1280

// blockSolves is each solve head's prediction of the held-out canonical
// rows te from all the other rows of the context, with the context's own
// hyperparameters, in closed form from the whole context's exact GP: with
// P = K⁻¹ and α = K⁻¹y, the residual of the rows te predicted from the
// rest is P_tt⁻¹ α_t (the block form of leave-one-out), so the
// prediction is y_t − P_tt⁻¹ α_t. P_tt is the Gram matrix of te's columns
// of L⁻¹, which buildHeads kept (head.linv). Rebuilding the heads on the
// other rows solved an m×m system per head and block (two 800-row
// factorisations per block at 1,000 rows); this costs |te|²·n/3 multiply-
// adds and a |te|-row factorisation. The two agree up to rounding.
//
// out[l·H + h] holds solve head h of layer l's predictions (nil for other
// heads); nil when the closed form does not apply: the rows fitted on are
// not all the others (m + |te| ≠ n), the hyperparameters are not the
// context's, or a solve head kept no L⁻¹ (experts, jitter, a large
// context, or not every row scored).
func (c *contextFit) blockSolves(ctx context.Context, te []int, m int, ard, iso gpHyper, ys []float64) ([][]float64, error) {
	n := c.n
	if m+len(te) != n || len(te) == 0 || !sameHyper(ard, c.hyper[0]) || !sameHyper(iso, c.hyper[1]) {
		return nil, nil
	}
	solves := 0
	for l := range c.layers {
		for h := range c.layers[l] {
			hd := &c.layers[l][h]
			if hd.spec.kind != kindSolve {
				continue
			}
			if hd.linv == nil {
				return nil, nil
			}
			solves++
		}
	}
	if solves == 0 {
		return nil, nil
	}
	out := make([][]float64, len(c.layers)*headsPerLayer)
	// te in ascending order: a tile of rows then starts its dot products
	// where its lowest rows' columns of L⁻¹ start.
	idx := make([]int, len(te))
	for a := range idx {
		idx[a] = a
	}
	slices.SortFunc(idx, func(a, b int) int { return te[a] - te[b] })
	rows := make([]int, len(te))
	for a, k := range idx {
		rows[a] = te[k]
	}
	nb := len(rows)
	for l := range c.layers {
		for h := range c.layers[l] {
			hd := &c.layers[l][h]
			if hd.spec.kind != kindSolve {
				continue
			}
			p := tileGram(hd.linv, n, rows)
			if err := cholesky(ctx, p, nb); err != nil {
				return nil, nil // not positive definite in rounding: rebuild instead
			}
			rhs := make([]float64, nb)
			for a, i := range rows {
				rhs[a] = hd.values[i]
			}
			r := cholSolve(p, nb, rhs)
			pred := make([]float64, nb)
			for a, k := range idx {
				pred[k] = ys[rows[a]] - r[a]
			}
			out[l*headsPerLayer+h] = pred
		}
	}
	return out, ctx.Err()
}

// tileGram is the lower triangle of the Gram matrix of the rows of x (n×n,
// row i zero before column i) named by rows (ascending), 4×4 at a time
// (dotBlock), each tile's sums starting where the later of its two groups
// of rows starts.
func tileGram(x []float64, n int, rows []int) []float64 {
	nb := len(rows)
	g := make([]float64, nb*nb)
	var ra, rb [4][]float64
	var out [16]float64
	for a0 := 0; a0 < nb; a0 += 4 {
		for b0 := 0; b0 <= a0; b0 += 4 {
			s := max(rows[a0], rows[b0])
			for q := range 4 {
				ra[q] = x[rows[min(a0+q, nb-1)]*n+s:]
				rb[q] = x[rows[min(b0+q, nb-1)]*n+s:]
			}
			dotBlock(&ra, &rb, n-s, &out)
			for r := 0; r < 4 && a0+r < nb; r++ {
				for q := 0; q < 4 && b0+q <= a0+r; q++ {
					g[(a0+r)*nb+b0+q] = out[4*r+q]
				}
			}
		}
	}
	return g
}

// sameHyper says a and b are the same hyperparameters.
func sameHyper(a, b gpHyper) bool {
	return a.sf2 == b.sf2 && a.sn2 == b.sn2 && slices.Equal(a.ell, b.ell)
}
