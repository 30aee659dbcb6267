package gpu

import (
	"context"
	"math"
	"sort"
)

// Head kinds. A solve head is the Gaussian-process posterior mean written as
// attention: unnormalised kernel scores, values solved at cache build
// (α = (K+σ²I)⁻¹r, the step in which context rows attend to context rows).
// A smooth head is softmax attention (Nadaraya–Watson kernel smoothing) whose
// values are the residual the layers before it left.
const (
	kindSolve = iota
	kindSmooth
)

// sqDist is the ARD squared distance Σ_d ((a_d−b_d)·inv_d)².
func sqDist(a, b, inv []float64) float64 {
	var s float64
	for d, w := range inv {
		t := (a[d] - b[d]) * w
		s += t * t
	}
	return s
}

// solveResult is a fitted solve head on the context.
type solveResult struct {
	alpha []float64 // per row, already divided by the number of chunks
	loo   []float64 // leave-one-out prediction of the head on each row
	linv  []float64 // the exact GP's L⁻¹, column a as row a (zero before a), when kept (blocksolve.go)
}

// fitSolve solves the GP head on target r. Rows are dealt round-robin into
// ceil(n/chunk) chunks (one expert each, averaged); a single chunk is the
// exact GP. For rows marked in score (nil: all) it also returns the
// leave-one-out prediction: the row's own expert in closed form, plus the
// other experts' predictions. It stops with an error wrapping ctx.Err()
// once ctx ends.
func fitSolve(ctx context.Context, z []float64, n, f int, inv []float64, sf2, sn2 float64, r []float64, chunk int, score []bool) (solveResult, error) {
	nc := solveExperts(n, chunk)
	res := solveResult{alpha: make([]float64, n), loo: make([]float64, n)}
	own := make([]float64, n)
	for c := range nc {
		var rows []int
		for i := c; i < n; i += nc {
			rows = append(rows, i)
		}
		m := len(rows)
		k := make([]float64, m*m)
		// The expert's rows feature by feature: a row's distances are f
		// vector passes (sqDistScaledAcc), sqDist's bits.
		zr := make([]float64, m*f)
		for a, i := range rows {
			copy(zr[a*f:(a+1)*f], z[i*f:(i+1)*f])
		}
		zt := transpose(zr, m, f)
		jitter := 0.0
		for {
			if err := parallelFor(ctx, m, 16, func(lo, hi int) {
				d2 := make([]float64, hi)
				for a := lo; a < hi; a++ {
					clear(d2[:a+1])
					for d, w := range inv {
						sqDistScaledAcc(d2[:a+1], zt[d*m:], zr[a*f+d], w)
					}
					ka := k[a*m : a*m+a+1]
					expScaled(ka, d2[:a+1], -0.5, 0)
					for b := range ka {
						ka[b] = sf2 * ka[b]
					}
					k[a*m+a] += sn2 + jitter
				}
			}); err != nil {
				return solveResult{}, err
			}
			err := cholesky(ctx, k, m)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return solveResult{}, ctx.Err()
			}
			// A PD kernel plus noise rarely gets here; add jitter and retry.
			jitter = max(jitter*10, 1e-9*sf2)
		}
		rr := make([]float64, m)
		for a, i := range rows {
			rr[a] = r[i]
		}
		al := cholSolve(k, m, rr)
		// [K⁻¹]_aa = ‖L⁻¹e_a‖²: column a of L⁻¹ from a on, its squares
		// summed from a in order.
		need := func(a int) bool { return score == nil || score[rows[a]] }
		loo := func(a int, x []float64) {
			if res.linv != nil {
				copy(res.linv[a*m+a:(a+1)*m], x[a:m])
			}
			d := x[a] * x[a]
			for b := a + 1; b < m; b++ {
				d += x[b] * x[b]
			}
			own[rows[a]] = rr[a] - al[a]/d
		}
		var needed []int
		for a := range m {
			if need(a) {
				needed = append(needed, a)
			}
		}
		if nc == 1 && jitter == 0 && len(needed) == m && m <= maxBlockSolveRows {
			res.linv = make([]float64, m*m)
		}
		for a := range m {
			res.alpha[rows[a]] = al[a] / float64(nc)
		}
		if err := looColumns(ctx, k, m, needed, loo); err != nil {
			return solveResult{}, err
		}
	}
	if nc == 1 {
		copy(res.loo, own)
		return res, nil
	}
	zt := transpose(z, n, f)
	err := parallelFor(ctx, n, 32, func(lo, hi int) {
		d2, w := make([]float64, n), make([]float64, n)
		for i := lo; i < hi; i++ {
			if score != nil && !score[i] {
				continue
			}
			clear(d2)
			for d, wd := range inv {
				sqDistScaledAcc(d2, zt[d*n:], z[i*f+d], wd)
			}
			expScaled(w, d2, -0.5, 0)
			s := own[i] / float64(nc)
			for j := range n {
				if j%nc == i%nc {
					continue
				}
				s += sf2 * w[j] * res.alpha[j]
			}
			res.loo[i] = s
		}
	})
	if err != nil {
		return solveResult{}, err
	}
	return res, nil
}

// Past largeSolveRows context rows the GP experts shrink faster than the
// context grows: m = largeExpertRows·(largeSolveRows/n)^1.5 rows (537 at
// 10,000, 292 at 15,000), never below minExpertRows (reached at 16,384).
// An expert of m rows costs m³/3 to factor and its kernel m² to fill, so
// n/m of them cost n·m²/3 and n·m: both fall as the context grows up to the
// floor and grow linearly in n past it, where the rest of Fit is linear
// too. The experts are interleaved over the whole context, so each still
// spans it, only more thinly; on the engine benchmark's 10,000-row table R²
// went from 0.98095 (5 experts of 2,000 rows) to 0.98084 (8 of 1,250),
// 0.98074 (12 of 834) and 0.98055 (19 of 527), with the solves' share of
// Fit from about half to a tenth; at 15,000 rows from 0.98074 to 0.98004.
// Contexts up to largeSolveRows (every evaluation table) keep the chunk's
// experts.
const (
	largeSolveRows  = 4096
	largeExpertRows = 2048
	minExpertRows   = 256
)

// solveExperts is how many interleaved experts fitSolve deals n rows into
// under chunk (the most rows one expert solves; ≤ 0: one exact GP).
func solveExperts(n, chunk int) int {
	if chunk <= 0 || n <= chunk && n <= largeSolveRows {
		return 1
	}
	m := min(chunk, n)
	if n > largeSolveRows {
		r := float64(largeSolveRows) / float64(n)
		m = min(m, max(minExpertRows, int(largeExpertRows*r*math.Sqrt(r))))
	}
	return (n + m - 1) / m
}

// looColumns calls loo(a, x) with x column a of L⁻¹ (from a on) for each
// a in cols (ascending), four at a time from the first of them
// (invLowerCols, blocked), so a subset of the columns (the scored rows of
// a large context) costs only its own groups; all of them are invLowerT's
// tiles.
func looColumns(ctx context.Context, l []float64, m int, cols []int, loo func(a int, x []float64)) error {
	groups := (len(cols) + 3) / 4
	return parallelFor(ctx, groups, 1, func(lo, hi int) {
		var xs [4][]float64
		for q := range xs {
			xs[q] = make([]float64, m)
		}
		for gi := lo; gi < hi; gi++ {
			g := cols[gi*4 : min(gi*4+4, len(cols))]
			var c [4]int
			for q := range c {
				c[q] = g[min(q, len(g)-1)]
			}
			invLowerCols(l, m, c, &xs)
			for q, a := range g {
				loo(a, xs[q])
			}
		}
	})
}

// initSlack bounds the sorted initialisation: a candidate joins it only if
// its squared error is within this factor of the best's. Blending the best
// few steadies noisy out-of-fold scores; blending heads far worse than the
// best only drags a clear winner down (a noiseless linear target, where the
// trend is exact and the neighbour heads are not, gave R² 0.995 instead of
// 1). Measured on the suite: 2 leaves every dataset within 1e-4 or better
// (concrete +0.0016 for model-4l).
const initSlack = 2

// ensembleSelect picks non-negative weights summing to one over candidate
// predictions cand (each length n) that minimise the squared error against y,
// by greedy forward selection with replacement (Caruana et al. 2004): robust
// on small contexts, where free least-squares stacking overfits.
func ensembleSelect(cand [][]float64, y []float64, init, rounds int) []float64 {
	n := len(y)
	w := make([]float64, len(cand))
	cur := make([]float64, n)
	// Sorted initialisation: start from the init best candidates in equal
	// shares, which keeps a small context from betting on one noisy winner;
	// only those within initSlack of the best join.
	order := make([]int, len(cand))
	errs := make([]float64, len(cand))
	for k := range cand {
		order[k] = k
		errs[k] = sse(y, cand[k])
	}
	sort.SliceStable(order, func(a, b int) bool { return errs[order[a]] < errs[order[b]] })
	count := 0
	add := func(k int) {
		count++
		w[k]++
		for i := range n {
			cur[i] += (cand[k][i] - cur[i]) / float64(count)
		}
	}
	for _, k := range order[:min(init, len(order))] {
		if count > 0 && errs[k] > initSlack*errs[order[0]] {
			break
		}
		add(k)
	}
	for range rounds {
		best, bestErr := -1, math.Inf(1)
		for k, c := range cand {
			var e float64
			for i := range n {
				p := cur[i] + (c[i]-cur[i])/float64(count+1)
				e += (y[i] - p) * (y[i] - p)
			}
			if e < bestErr {
				best, bestErr = k, e
			}
		}
		add(best)
	}
	for k := range w {
		w[k] /= float64(count)
	}
	return w
}

// baggedSelect averages ensembleSelect over fixed half-samples of the rows
// (bagged ensemble selection, Caruana et al. 2006): the weights then reflect
// which heads win consistently, not on a few lucky rows.
func baggedSelect(cand [][]float64, y []float64, bags, init, rounds int) []float64 {
	n := len(y)
	w := make([]float64, len(cand))
	if bags <= 1 || n < 8 {
		return ensembleSelect(cand, y, init, rounds)
	}
	sub := make([][]float64, len(cand))
	for b := range bags {
		rows := spreadSampleSeed(n, n/2, uint64(b+1))
		ys := make([]float64, len(rows))
		for k := range cand {
			sub[k] = make([]float64, len(rows))
			for a, i := range rows {
				sub[k][a] = cand[k][i]
			}
		}
		for a, i := range rows {
			ys[a] = y[i]
		}
		for k, v := range ensembleSelect(sub, ys, init, rounds) {
			w[k] += v / float64(bags)
		}
	}
	return w
}

func sse(y, p []float64) float64 {
	var s float64
	for i := range y {
		s += (y[i] - p[i]) * (y[i] - p[i])
	}
	return s
}

// localMean is the Gaussian-weighted mean of v with squared bandwidth h2,
// skipping row skip (−1 for none); w is scratch as long as d2.
func localMean(d2, v []float64, h2 float64, skip int, w []float64) float64 {
	if h2 <= 0 {
		h2 = 1e-300
	}
	s, far := -0.5/h2, 2*farExp*h2
	expScaled(w[:len(d2)], d2, s, 0)
	var num, den float64
	for j := range d2 {
		if j == skip || d2[j] > far {
			continue
		}
		num += w[j] * v[j]
		den += w[j]
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// kthSmallest returns the k-th smallest (0-based) of a, reordering a.
func kthSmallest[T float32 | float64](a []T, k int) T {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		if k <= j {
			hi = j
		} else if k >= i {
			lo = i
		} else {
			return a[k]
		}
	}
	return a[k]
}

// knnMean is the mean of v over the k smallest d2 (ties to the lower row),
// skipping row skip (−1 for none). It keeps a max-heap of the best k, so it
// is O(n log k) with no allocation beyond k indices.
func knnMean(d2, v []float64, k, skip int) float64 {
	n := len(d2)
	if skip >= 0 {
		n--
	}
	k = min(k, n)
	if k <= 0 {
		return 0
	}
	less := func(a, b int) bool { return d2[a] < d2[b] || (d2[a] == d2[b] && a < b) }
	h := make([]int, 0, k)
	j := 0
	for ; len(h) < k; j++ {
		if j == skip {
			continue
		}
		h = append(h, j)
		for c := len(h) - 1; c > 0; {
			p := (c - 1) / 2
			if !less(h[p], h[c]) {
				break
			}
			h[p], h[c] = h[c], h[p]
			c = p
		}
	}
	// Every row in the heap precedes j, so a tie with the top loses
	// (ties go to the lower row): most rows are rejected by one
	// comparison with the top's distance, kept in a register.
	top := d2[h[0]]
	for ; j < len(d2); j++ {
		if d2[j] >= top || j == skip {
			continue
		}
		h[0] = j
		for c := 0; ; {
			l, r, m := 2*c+1, 2*c+2, c
			if l < k && less(h[m], h[l]) {
				m = l
			}
			if r < k && less(h[m], h[r]) {
				m = r
			}
			if m == c {
				break
			}
			h[m], h[c] = h[c], h[m]
			c = m
		}
		top = d2[h[0]]
	}
	sort.Ints(h)
	var s float64
	for _, j := range h {
		s += v[j]
	}
	return s / float64(k)
}
