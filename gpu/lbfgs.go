package gpu

import (
	"context"
	"math"
)

// objective is a function to minimise: its value at x, and a function that
// returns its gradient there (called only for points the search keeps, since
// the gradient may cost more than the value), valid until the next call of
// the objective: lbfgs asks for a kept point's gradient before it tries
// another. ok is false where it cannot be evaluated.
type objective func(x []float64) (val float64, grad func() ([]float64, bool), ok bool)

// lbfgsMemory is the curvature L-BFGS has learnt: its last steps s and
// gradient changes y. Handed to the next call on the same objective from
// where the last stopped, it makes the two calls one search: the screening
// of a start and its continuation take the steps one uninterrupted search
// would.
type lbfgsMemory struct {
	s, y [][]float64
	rho  []float64
}

// lbfgs minimises fn from x (updated in place) with limited-memory BFGS and a
// backtracking line search, starting from and updating the curvature in mem
// (nil: none kept). project keeps iterates feasible. It returns the
// final value and whether any evaluation succeeded. It stops after the
// iteration in which ctx ends.
// lsGiveUp is the step below which the line search gives up on a
// projected trial move that is not a first-order descent. At the end of a
// search, length scales pinned at maxEll with the gradient pushing them
// further blocked the direction, and the search spent twenty trial
// factorisations halving the step to 2⁻¹⁹ before stopping where it was:
// most of the 800-row refinement's cost. The trials from step 1 down to
// ⅛ still run, so a step that curvature alone makes acceptable (the only
// way a move that is no descent at first order can pass) is still found.
const lsGiveUp = 1.0 / 8

func lbfgs(ctx context.Context, fn objective, x []float64, iters int, project func([]float64), mem *lbfgsMemory) (float64, bool) {
	const keep = 6
	if mem == nil {
		mem = &lbfgsMemory{}
	}
	n := len(x)
	project(x)
	fx, grad, ok := fn(x)
	if !ok {
		return 0, false
	}
	g, ok := grad()
	if !ok {
		return 0, false
	}
	sHist, yHist, rho := mem.s, mem.y, mem.rho
	defer func() { mem.s, mem.y, mem.rho = sHist, yHist, rho }()
	dir := make([]float64, n)
	for it := 0; it < iters && ctx.Err() == nil; it++ {
		// Two-loop recursion.
		copy(dir, g)
		al := make([]float64, len(sHist))
		for k := len(sHist) - 1; k >= 0; k-- {
			al[k] = rho[k] * dot(sHist[k], dir)
			for i := range dir {
				dir[i] -= al[k] * yHist[k][i]
			}
		}
		if k := len(sHist) - 1; k >= 0 {
			gam := dot(sHist[k], yHist[k]) / dot(yHist[k], yHist[k])
			for i := range dir {
				dir[i] *= gam
			}
		} else {
			gn := math.Sqrt(dot(g, g))
			for i := range dir {
				dir[i] /= max(gn, 1)
			}
		}
		for k := range sHist {
			b := rho[k] * dot(yHist[k], dir)
			for i := range dir {
				dir[i] += sHist[k][i] * (al[k] - b)
			}
		}
		for i := range dir {
			dir[i] = -dir[i]
		}
		slope := dot(g, dir)
		if slope >= 0 {
			for i := range dir {
				dir[i] = -g[i]
			}
			slope = -dot(g, g)
			sHist, yHist, rho = nil, nil, nil
		}
		step := 1.0
		var xn, gn []float64
		var fn2 float64
		found := false
		for ls := 0; ls < 20 && ctx.Err() == nil; ls++ {
			xn = make([]float64, n)
			for i := range x {
				xn[i] = x[i] + step*dir[i]
			}
			project(xn)
			if step < lsGiveUp {
				// Past the first trials, a projected move that is no
				// descent at first order (a direction blocked at the
				// bounds) cannot meet the Armijo test at any smaller
				// step: stop before paying for the trial.
				var gm float64
				for i := range x {
					gm += g[i] * (xn[i] - x[i])
				}
				if gm >= 0 {
					break
				}
			}
			v, grad, okn := fn(xn)
			if okn && v <= fx+1e-4*step*slope {
				if gn, okn = grad(); !okn {
					break
				}
				fn2, found = v, true
				break
			}
			step *= 0.5
		}
		if !found {
			break
		}
		s := make([]float64, n)
		yv := make([]float64, n)
		for i := range x {
			s[i] = xn[i] - x[i]
			yv[i] = gn[i] - g[i]
		}
		if sy := dot(s, yv); sy > 1e-12 {
			sHist = append(sHist, s)
			yHist = append(yHist, yv)
			rho = append(rho, 1/sy)
			if len(sHist) > keep {
				sHist, yHist, rho = sHist[1:], yHist[1:], rho[1:]
			}
		}
		improved := fx - fn2
		copy(x, xn)
		fx, g = fn2, gn
		if improved < 1e-7*(1+math.Abs(fx)) {
			break
		}
	}
	return fx, true
}
