package gpu

import (
	"context"
	"math"
)

// objective is a function to minimise: its value at x, and a function that
// returns its gradient there (called only for points the search keeps, since
// the gradient may cost more than the value). ok is false where it cannot
// be evaluated.
type objective func(x []float64) (val float64, grad func() ([]float64, bool), ok bool)

// lbfgsMemory is the curvature L-BFGS has learnt: its last steps s and
// gradient changes y. Handed from one search to the next (a start's
// screening to its continuation, a subsample to a larger one), it spares
// the next search the steepest-descent steps it would take to learn it
// again.
type lbfgsMemory struct {
	s, y [][]float64
	rho  []float64
}

// scale multiplies the remembered curvature by c: the next objective is c
// times as curved as the last (a likelihood on c times as many rows).
func (m *lbfgsMemory) scale(c float64) {
	for k := range m.y {
		for i := range m.y[k] {
			m.y[k][i] *= c
		}
		m.rho[k] /= c
	}
}

// lbfgs minimises fn from x (updated in place) with limited-memory BFGS and a
// backtracking line search, starting from and updating the curvature in mem
// (nil: none kept). project keeps iterates feasible. It returns the
// final value and whether any evaluation succeeded. It stops after the
// iteration in which ctx ends.
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
		blocked(x, dir, project)
		slope := dot(g, dir)
		if slope >= 0 {
			for i := range dir {
				dir[i] = -g[i]
			}
			blocked(x, dir, project)
			slope = dot(g, dir)
			sHist, yHist, rho = nil, nil, nil
			if slope >= 0 {
				break // a bound blocks every descent direction
			}
		}
		// A unit step, unless it moves a log-parameter by more than
		// maxLogStep: a direction learnt from a step along a bound can be
		// orders of magnitude too long, and halving down from it cost up to
		// ten factorisations.
		step := 1.0
		var big float64
		for _, d := range dir {
			big = max(big, math.Abs(d))
		}
		if big > maxLogStep {
			step = maxLogStep / big
		}
		var xn, gn []float64
		var fn2 float64
		found := false
		for ls := 0; ls < 20 && ctx.Err() == nil; ls++ {
			xn = make([]float64, n)
			for i := range x {
				xn[i] = x[i] + step*dir[i]
			}
			project(xn)
			// Armijo along the projected path: the decrease the gradient
			// promises for the step actually taken.
			var promised float64
			for i := range x {
				promised += g[i] * (xn[i] - x[i])
			}
			v, grad, okn := fn(xn)
			if okn && v <= fx+1e-4*promised {
				if gn, okn = grad(); !okn {
					break
				}
				fn2, found = v, true
				break
			}
			step *= backtrack(okn, v-fx, promised)
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

// blocked zeroes the components of dir that push x, already feasible,
// further past a bound of project: the search then moves along the bound
// instead of into it, where projected steps of every length fail the line
// search.
func blocked(x, dir []float64, project func([]float64)) {
	xp := make([]float64, len(x))
	for i := range x {
		xp[i] = x[i] + dir[i]
	}
	project(xp)
	for i := range x {
		if dir[i] != 0 && xp[i] == x[i] {
			dir[i] = 0
		}
	}
}

// maxLogStep is the longest first trial step of the line search in any
// log-parameter: a factor e² in a length scale or a variance.
const maxLogStep = 2

// backtrack is the factor by which the line search shortens a rejected
// step: the minimiser of the quadratic through the current value (with the
// slope the step promised) and the trial's (a change of dv), kept within
// [0.1, 0.5]; 0.25 where the trial could not be evaluated.
func backtrack(ok bool, dv, promised float64) float64 {
	if !ok || !(dv > promised) {
		return 0.25
	}
	u := -promised / (2 * (dv - promised))
	return min(max(u, 0.1), 0.5)
}
