package gpu

import (
	"context"
	"math"
)

// gpHyper are the hyperparameters of the ARD squared-exponential kernel
// k(a,b) = sf2·exp(−½ Σ_d (a_d−b_d)²/ell_d²) plus noise sn2 on the diagonal,
// in the standardised space of prep.
type gpHyper struct {
	ell []float64
	sf2 float64
	sn2 float64
}

// Bounds of the hyperparameter search, in standardised units. The noise floor
// keeps the solve well conditioned, which also keeps the solved values small
// enough to survive bf16 storage.
const (
	minEll   = 2e-3
	maxEll   = 200
	minNoise = 2e-4
	// maxSignal caps the signal variance of the standardised target (whose
	// variance is 1). Larger values with long length scales only imitate a
	// polynomial trend (the trend head's job) through solved values that
	// cancel by orders of magnitude, which no 8- or 16-bit cache can hold.
	maxSignal = 20
	// noiseFloor is the least noise variance a fitted GP keeps, as a share
	// of its signal variance. A marginal likelihood that finds almost no
	// noise has the posterior mean pass through every row, rows whose
	// features do not explain their target included (a missing feature
	// imputed by its median, an outlier), and the solved values that do
	// that cancel by orders of magnitude, which no 8- or 16-bit cache
	// holds exactly. On 300 rows × 4 features with a feature missing in
	// every 37th row, R² on 3,000 queries went from 0.93–0.95 to
	// 0.964–0.975 and int8 from up to 0.04 away from bf16 to 1.2·10⁻³; on
	// 100k such rows × 16 features it cost 2·10⁻⁴ (a 1 % floor: 1.1·10⁻³,
	// for little more gain); no fit on the suite reaches it.
	noiseFloor = 0.003
)

// gpValue is the negative log marginal likelihood of y under the kernel
// with log-parameters theta = [log ell_1..F, log sf2, log sn2], and a
// function that finishes its gradient from the same factorisation. z is
// m×f row-major. It fails (false) when the kernel matrix cannot be factored
// or ctx has ended. The value costs the Cholesky factorisation; the gradient
// costs about twice that again (K⁻¹ in full), so a line search that rejects
// a trial point never pays for it.
//
// w holds the m×m buffers between calls (nil: fresh ones): the gradient
// function is then valid until the next call with the same w, which the
// line search's order (a kept point's gradient before the next trial)
// keeps. A search at 800 rows allocated and cleared four 5 MB matrices per
// evaluation.
func gpValue(ctx context.Context, z []float64, m, f int, y, theta []float64, w *gpWork) (float64, func() ([]float64, bool), bool) {
	if w == nil {
		w = &gpWork{}
	}
	inv2 := make([]float64, f)
	for d := range f {
		e := math.Exp(theta[d])
		inv2[d] = 1 / (e * e)
	}
	sf2 := math.Exp(theta[f])
	sn2 := math.Exp(theta[f+1])
	// The lower triangles only: the Cholesky factorisation and the gradient
	// read no other entry (K is symmetric), and the mirror images were
	// writes down columns, one cache line each.
	k := grow(&w.k, m*m)
	ks := grow(&w.ks, m*m) // signal part, kept for the gradient
	// Row i's lower half in one piece: squared distances, then their
	// weights in one vector pass (expScaled). Each piece writes only its
	// rows, so the bits do not depend on cores.
	// The features stored feature by feature (zt), so that a row's
	// distances are f vector passes (sqDistAcc), each adding a feature's
	// term in the order of a loop over the pair's features.
	zt := grow(&w.zt, f*m)
	for i := range m {
		for d := range f {
			zt[d*m+i] = z[i*f+d]
		}
	}
	parallelFor(ctx, m, 16, func(lo, hi int) {
		d2 := make([]float64, hi)
		for i := lo; i < hi; i++ {
			clear(d2[:i+1])
			for d := range f {
				sqDistAcc(d2[:i+1], zt[d*m:], z[i*f+d], inv2[d])
			}
			e := ks[i*m : i*m+i+1]
			expScaled(e, d2[:i+1], -0.5, 0)
			ki := k[i*m : i*m+i+1]
			for j := range e {
				e[j] *= sf2
				ki[j] = e[j]
			}
			ki[i] += sn2 + 1e-9*sf2
		}
	})
	if ctx.Err() != nil {
		return 0, nil, false
	}
	if err := cholesky(ctx, k, m); err != nil {
		return 0, nil, false
	}
	alpha := cholSolve(k, m, y)
	val := 0.5 * dot(y, alpha)
	for i := range m {
		val += math.Log(k[i*m+i])
	}
	val += 0.5 * float64(m) * math.Log(2*math.Pi)
	return val, func() ([]float64, bool) { return gpGradient(ctx, z, m, f, k, ks, alpha, inv2, sn2, w) }, true
}

// gpWork is gpValue's buffers, reused from one evaluation to the next: K and
// its factor, K's signal part, the features by feature, L⁻¹ and K⁻¹. None
// needs clearing: each step writes every entry it later reads.
type gpWork struct {
	k, ks, zt, xt, inv []float64
}

// grow returns (*b)[:n], reallocating *b where it is shorter.
func grow(b *[]float64, n int) []float64 {
	if cap(*b) < n {
		*b = make([]float64, n)
	}
	return (*b)[:n]
}

// gpGradient is gpValue's gradient from the Cholesky factor l of K,
// its signal part ks, α = K⁻¹y and the kernel's 1/ell² and noise.
func gpGradient(ctx context.Context, z []float64, m, f int, l, ks, alpha, inv2 []float64, sn2 float64, w *gpWork) ([]float64, bool) {
	xt := invLowerTInto(ctx, l, m, grow(&w.xt, m*m))
	inv := invFullInto(ctx, xt, m, grow(&w.inv, m*m))
	if ctx.Err() != nil {
		return nil, false
	}
	// W = K⁻¹ − ααᵀ; grad_θ = ½ tr(W ∂K/∂θ). W and K are symmetric, so
	// the lower triangle counts twice. Rows are summed in fixed pieces of
	// gradRows, each into its own partial sums, and the pieces in order:
	// the bits do not depend on cores (they differ from one running sum
	// over all pairs by rounding only).
	const gradRows = 16
	pieces := (m + gradRows - 1) / gradRows
	part := make([]float64, pieces*(f+2))
	// Row i's weights c_j = 2·W_ij·Ks_ij over j < i first, then each
	// feature's Σ_j c_j (z_id − z_jd)² over the features stored feature by
	// feature (wsqSum, vector FMA sums on AVX-512).
	zt := w.zt[:f*m]
	parallelFor(ctx, m, gradRows, func(lo, hi int) {
		g := part[lo/gradRows*(f+2) : (lo/gradRows+1)*(f+2)]
		gd := g[:f]
		c := make([]float64, hi)
		for i := lo; i < hi; i++ {
			ci := c[:i]
			invi, ksi, ai := inv[i*m:i*m+i], ks[i*m:i*m+i], alpha[i]
			for j := range ci {
				ci[j] = 2 * (invi[j] - ai*alpha[j]) * ksi[j]
				g[f] += ci[j]
			}
			for d := range f {
				gd[d] += wsqSum(ci, zt[d*m:], z[i*f+d])
			}
			wi := inv[i*m+i] - alpha[i]*alpha[i]
			g[f] += wi * ks[i*m+i]
			g[f+1] += wi * sn2
		}
	})
	if ctx.Err() != nil {
		return nil, false
	}
	grad := make([]float64, f+2)
	gd := make([]float64, f)
	for p := range pieces {
		g := part[p*(f+2) : (p+1)*(f+2)]
		for d := range f {
			gd[d] += g[d]
		}
		grad[f] += g[f]
		grad[f+1] += g[f+1]
	}
	for d := range f {
		grad[d] = 0.5 * gd[d] * inv2[d]
	}
	grad[f] *= 0.5
	grad[f+1] *= 0.5
	return grad, true
}

// clampTheta keeps the log-parameters inside the search bounds.
func clampTheta(theta []float64, f int) {
	for d := range f {
		theta[d] = min(max(theta[d], math.Log(minEll)), math.Log(maxEll))
	}
	theta[f] = min(max(theta[f], math.Log(1e-3)), math.Log(maxSignal))
	theta[f+1] = min(max(theta[f+1], math.Log(minNoise)), math.Log(10))
}

// fitGP maximises the marginal likelihood from each start and keeps the best.
// It works on at most maxRows rows of the context (a fixed, spread-out
// subsample), because each step costs a Cholesky factorisation. Once ctx
// ends the search stops where it is; the caller checks ctx.
func fitGP(ctx context.Context, z []float64, n, f int, y []float64, c gpFitConfig) gpHyper {
	// Screen every start briefly, then continue the best one. The starts
	// are independent searches, so they run at once, each on its own
	// core; the best is then chosen in the starts' order, as one after
	// another would.
	thetas := make([][]float64, len(c.starts))
	vals := make([]float64, len(c.starts))
	oks := make([]bool, len(c.starts))
	screen := make([]func(), len(c.starts))
	for k, s := range c.starts {
		theta := make([]float64, f+2)
		for d := range f {
			theta[d] = math.Log(s * math.Sqrt(float64(f)))
		}
		theta[f+1] = math.Log(0.1)
		thetas[k] = theta
		screen[k] = func() { vals[k], oks[k] = fitGPTheta(ctx, z, n, f, y, c.rows, c.screenIters, theta) }
	}
	parallelDo(ctx, screen...) // the caller checks ctx
	var best []float64
	bestVal := math.Inf(1)
	for k := range c.starts {
		if oks[k] && vals[k] < bestVal {
			bestVal, best = vals[k], thetas[k]
		}
	}
	if best != nil {
		fitGPTheta(ctx, z, n, f, y, c.rows, c.iters, best)
		if c.refineRows > c.rows && n > c.rows {
			fitGPTheta(ctx, z, n, f, y, c.refineRows, c.refineIters, best)
		}
	}
	h := gpHyper{ell: make([]float64, f), sf2: 1, sn2: 0.1}
	if best == nil {
		for d := range f {
			h.ell[d] = math.Sqrt(float64(f))
		}
		return h
	}
	for d := range f {
		h.ell[d] = math.Exp(best[d])
	}
	h.sf2 = math.Exp(best[f])
	h.sn2 = max(math.Exp(best[f+1]), noiseFloor*h.sf2)
	return h
}

// gpFitConfig sets how much work the hyperparameter search does.
type gpFitConfig struct {
	starts      []float64 // initial length scales, in multiples of √f
	rows        int       // subsample size of the main search
	screenIters int       // iterations spent on each start before choosing
	iters       int       // further iterations on the chosen start
	refineRows  int       // larger subsample for a final refinement (0: none)
	refineIters int
}

// sampleRows copies at most maxRows rows spread over the context (see
// spreadSample) and their targets; m is how many.
func sampleRows(z []float64, n, f int, y []float64, maxRows int) (zs, ys []float64, m int) {
	rows := spreadSample(n, maxRows)
	m = len(rows)
	zs, ys = make([]float64, m*f), make([]float64, m)
	for k, i := range rows {
		copy(zs[k*f:(k+1)*f], z[i*f:(i+1)*f])
		ys[k] = y[i]
	}
	return zs, ys, m
}

// fitGPTheta runs L-BFGS from theta (updated in place) on a fixed subsample
// of at most maxRows rows and returns the final objective.
func fitGPTheta(ctx context.Context, z []float64, n, f int, y []float64, maxRows, iters int, theta []float64) (float64, bool) {
	zs, ys, m := sampleRows(z, n, f, y, maxRows)
	w := &gpWork{}
	return lbfgs(ctx, func(t []float64) (float64, func() ([]float64, bool), bool) {
		return gpValue(ctx, zs, m, f, ys, t, w)
	}, theta, iters, func(t []float64) { clampTheta(t, f) }, nil)
}

// spreadSample returns up to k row indices out of n, spread evenly by a fixed
// stride over a fixed pseudo-random permutation, so the subsample neither
// depends on row order nor varies between calls.
func spreadSample(n, k int) []int { return spreadSampleSeed(n, k, 0) }

// spreadSampleSeed is spreadSample with another fixed permutation per seed.
func spreadSampleSeed(n, k int, seed uint64) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	if k >= n {
		return idx
	}
	// Fisher–Yates with a fixed splitmix64 stream.
	s := uint64(0x9e3779b97f4a7c15) * (seed + 1)
	for i := n - 1; i > 0; i-- {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		j := int(z % uint64(i+1))
		idx[i], idx[j] = idx[j], idx[i]
	}
	return idx[:k]
}

// fitGPIso fits a GP with one length scale shared by every feature: three
// hyperparameters, so it overfits a small context less than the ARD fit.
// Once ctx ends the search stops where it is; the caller checks ctx.
func fitGPIso(ctx context.Context, z []float64, n, f int, y []float64, c gpFitConfig) gpHyper {
	zs, ys, m := sampleRows(z, n, f, y, c.rows)
	// Each search has its own workspace, so that the two screenings can
	// run at once.
	objective := func(w *gpWork) func(t []float64) (float64, func() ([]float64, bool), bool) {
		return func(t []float64) (float64, func() ([]float64, bool), bool) {
			full := make([]float64, f+2)
			for d := range f {
				full[d] = t[0]
			}
			full[f], full[f+1] = t[1], t[2]
			val, grad, ok := gpValue(ctx, zs, m, f, ys, full, w)
			if !ok {
				return 0, nil, false
			}
			return val, func() ([]float64, bool) {
				g, ok := grad()
				if !ok {
					return nil, false
				}
				var g0 float64
				for d := range f {
					g0 += g[d]
				}
				return []float64{g0, g[f], g[f+1]}, true
			}, true
		}
	}
	project := func(t []float64) {
		t[0] = min(max(t[0], math.Log(minEll)), math.Log(maxEll))
		t[1] = min(max(t[1], math.Log(1e-3)), math.Log(maxSignal))
		t[2] = min(max(t[2], math.Log(minNoise)), math.Log(10))
	}
	// Screen both starts, then continue the better one with the curvature
	// its screening learnt: the steps the whole search from that start
	// would take, without the other start's.
	// The screenings run at once; the better is chosen in the starts'
	// order, as one after another would.
	starts := []float64{1, 0.2}
	ths := make([][]float64, len(starts))
	mems := make([]*lbfgsMemory, len(starts))
	works := make([]*gpWork, len(starts))
	vals := make([]float64, len(starts))
	oks := make([]bool, len(starts))
	screen := make([]func(), len(starts))
	for k, s := range starts {
		ths[k] = []float64{math.Log(s * math.Sqrt(float64(f))), 0, math.Log(0.1)}
		mems[k], works[k] = &lbfgsMemory{}, &gpWork{}
		screen[k] = func() {
			vals[k], oks[k] = lbfgs(ctx, objective(works[k]), ths[k], c.screenIters, project, mems[k])
		}
	}
	parallelDo(ctx, screen...) // the caller checks ctx
	var best []float64
	var bestMem *lbfgsMemory
	var bestWork *gpWork
	bv := math.Inf(1)
	for k := range starts {
		if oks[k] && vals[k] < bv {
			bv, best, bestMem, bestWork = vals[k], ths[k], mems[k], works[k]
		}
	}
	if best != nil {
		lbfgs(ctx, objective(bestWork), best, c.iters, project, bestMem)
	}
	h := gpHyper{ell: make([]float64, f), sf2: 1, sn2: 0.1}
	if best == nil {
		for d := range f {
			h.ell[d] = math.Sqrt(float64(f))
		}
		return h
	}
	h.sf2 = math.Exp(best[1])
	h.sn2 = max(math.Exp(best[2]), noiseFloor*h.sf2)
	for d := range f {
		h.ell[d] = math.Exp(best[0])
	}
	return h
}
