package gpu

import (
	"fmt"
	"math"
	"sort"
)

// prep is the preprocessing fitted on the context before any cache is built:
//
//   - a cell that is NaN or ±Inf is missing, and so is a glitch: a value
//     further from its column's context median than glitchSpreads robust
//     spreads (glitchBounds); a missing cell is replaced by the context
//     median of its column, and a column missing in at least
//     minIndicatorShare of the context's rows gains a 0/1 missingness
//     indicator column, so the model can learn from the fact that a value
//     was absent;
//   - a column with no present value, or one value only, carries no
//     information and is dropped;
//   - every column is standardised with the context mean and deviation;
//   - with more than maxDirect columns, the standardised columns are
//     projected on their leading principal axes (adaptive SVD), keeping 99.5%
//     of the variance and at most maxDirect axes;
//   - the target is standardised too; predictions are mapped back.
//
// A query cell missing in a column that had no missing context cell is
// imputed with the median alone.
type prep struct {
	inCols    int
	cols      []int     // raw column of each kept value column
	median    []float64 // per raw column
	lo, hi    []float64 // per raw column: values outside are glitches
	indicator []int     // raw columns that get a missingness indicator
	mean      []float64 // per standardised column
	scale     []float64
	proj      []float64 // outDim×stdCols row-major principal axes, or nil
	outDim    int
	yMean     float64
	yScale    float64
	tgt       targetLog // the target's scale (target.go)
}

// maxDirect is the number of standardised columns above which prep projects
// on principal axes. The projection knows nothing of the target: with 100
// independent columns of which 4 matter, keeping the 24 leading axes (the
// earlier bound) dropped most of the signal (R² 0.13 against 0.99 with
// every column, at twice the time on 3,000 rows), as the ARD length scales
// do the selecting the projection cannot.
const maxDirect = 128

// minIndicatorShare is the share of the context's rows a column must miss
// to gain a missingness indicator. A column missing in a few rows gains
// nothing from one: too few rows say what absence means, and the
// indicator's few large standardised values let the GP set the imputed rows
// apart and fit their column more sharply than its present rows support.
// On airquality's block folds (Solar_R missing in 5 of 93 rows) the
// indicator took Solar_R's ARD length scale from 5.9 to 0.73 and the fifth
// fold's R² from −1.20 to −2.04; on la_ozone (7 columns missing in 1–38%
// of rows) indicators cost 0.022 R² on the random splits and 0.010 on the
// blocks (docs/BENCHMARKS.md); no dataset there gained from one.
const minIndicatorShare = 0.5

func missing(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// glitchSpreads is how many robust spreads from its column's median a
// feature value must lie to count as a glitch (a sensor's 1e300, a unit
// slip of a million) and be treated as missing. One such value used to set
// its column's mean and deviation, squash every other row to one point and
// make every prediction the same number. The bound is far past anything a
// real heavy-tailed column reaches within its own context: 1,000 spreads
// is over 200 times the width of the central 98% of its values.
const glitchSpreads = 1000

// minGlitchRows is the fewest present values a column needs before values
// far from the rest are called glitches rather than the column's range.
const minGlitchRows = 20

// glitchBounds returns the range outside which a value of a column whose
// present context values are sorted is a glitch; ±Inf when the column has
// too few values, or too little spread, to tell. The spread is the larger
// of the interquartile range's and the central 98%'s normal-equivalent
// deviations, so a column mostly at one value (rain, counts) is judged by
// its tail.
func glitchBounds(sorted []float64) (lo, hi float64) {
	n := len(sorted)
	if n < minGlitchRows {
		return math.Inf(-1), math.Inf(1)
	}
	at := func(p float64) float64 { return sorted[int(p*float64(n-1)+0.5)] }
	spread := max((at(0.75)-at(0.25))/1.349, (at(0.99)-at(0.01))/4.653)
	if !(spread > 0) || math.IsInf(spread, 0) {
		return math.Inf(-1), math.Inf(1)
	}
	med := at(0.5)
	return med - glitchSpreads*spread, med + glitchSpreads*spread
}

// value returns row's cell of raw column c and whether it is present: in
// the row, finite and, in a context row (ctxRow), no glitch. A query is
// taken as asked: one far outside the context is the user's question, not
// a glitch, and imputing it would answer another (edge.go bounds it).
func (pp *prep) value(row []float64, c int, ctxRow bool) (float64, bool) {
	if c >= len(row) {
		return 0, false
	}
	v := row[c]
	return v, !missing(v) && (!ctxRow || v >= pp.lo[c] && v <= pp.hi[c])
}

// fitPrep fits the preprocessing on the context and returns it with the
// transformed context (n×outDim row-major) and the standardised target.
func fitPrep(X [][]float64, y []float64) (*prep, []float64, []float64, error) {
	n := len(X)
	p := len(X[0])
	for i, row := range X {
		if len(row) != p {
			return nil, nil, nil, fmt.Errorf("context row %d has %d features, row 0 has %d", i, len(row), p)
		}
	}
	pp := &prep{inCols: p, median: make([]float64, p), lo: make([]float64, p), hi: make([]float64, p)}
	vals := make([]float64, 0, n)
	for c := range p {
		vals = vals[:0]
		for _, row := range X {
			if !missing(row[c]) {
				vals = append(vals, row[c])
			}
		}
		sort.Float64s(vals)
		pp.lo[c], pp.hi[c] = glitchBounds(vals)
		vals = trimSorted(vals, pp.lo[c], pp.hi[c])
		if len(vals) == 0 {
			continue
		}
		mid := len(vals) / 2
		if len(vals)%2 == 1 {
			pp.median[c] = vals[mid]
		} else {
			pp.median[c] = (vals[mid-1] + vals[mid]) / 2
		}
		if vals[0] != vals[len(vals)-1] {
			pp.cols = append(pp.cols, c)
		}
		if float64(n-len(vals)) >= minIndicatorShare*float64(n) {
			pp.indicator = append(pp.indicator, c)
		}
	}
	raw := pp.rawRows(X, true)
	w := len(pp.cols) + len(pp.indicator)
	pp.mean = make([]float64, w)
	pp.scale = make([]float64, w)
	for c := range w {
		m, sd := meanSD(n, func(i int) float64 { return raw[i*w+c] })
		if sd == 0 {
			sd = 1
		}
		pp.mean[c], pp.scale[c] = m, sd
	}
	z := pp.standardise(raw, n)
	pp.outDim = w
	if w > maxDirect {
		pp.fitProjection(z, n, w)
		z = pp.project(z, n)
	}
	pp.tgt = fitTargetLog(y)
	ym, ys := meanSD(n, func(i int) float64 { return pp.tgt.forward(y[i]) })
	if ys == 0 {
		ys = 1
	}
	pp.yMean, pp.yScale = ym, ys
	yt := make([]float64, n)
	for i, v := range y {
		yt[i] = (pp.tgt.forward(v) - ym) / ys
	}
	return pp, z, yt, nil
}

// meanSD returns the mean and the (population) standard deviation of the n
// finite values at(0…n−1). Values so large that their sum or squared
// deviations overflow (|x| ≳ 1e154), or so small that the squares
// underflow, are summed scaled by their largest magnitude instead, so any
// finite column or target standardises; other values take the plain sums,
// whose bits the rest of the engine is tested against.
func meanSD(n int, at func(i int) float64) (m, sd float64) {
	plain := func(scale float64) (float64, float64) {
		var s float64
		for i := range n {
			s += at(i) / scale
		}
		m := s / float64(n)
		var v float64
		for i := range n {
			d := at(i)/scale - m
			v += d * d
		}
		return m, math.Sqrt(v / float64(n))
	}
	m, sd = plain(1)
	if !math.IsInf(m, 0) && !math.IsNaN(sd) && !math.IsInf(sd, 0) && sd > 1e-140 {
		return m, sd
	}
	var amax float64
	constant := true
	for i := range n {
		amax = max(amax, math.Abs(at(i)))
		constant = constant && at(i) == at(0)
	}
	if constant {
		return at(0), 0
	}
	m, sd = plain(amax)
	return m * amax, sd * amax
}

// trimSorted returns the part of sorted within [lo, hi].
func trimSorted(sorted []float64, lo, hi float64) []float64 {
	a := sort.SearchFloat64s(sorted, lo)
	b := sort.Search(len(sorted), func(i int) bool { return sorted[i] > hi })
	return sorted[a:b]
}

// rawRows imputes and lays out the kept columns then the indicators; ctx
// says X is context rows, whose glitches are missing.
func (pp *prep) rawRows(X [][]float64, ctx bool) []float64 {
	w := len(pp.cols) + len(pp.indicator)
	out := make([]float64, len(X)*w)
	for i, row := range X {
		o := out[i*w : (i+1)*w]
		for k, c := range pp.cols {
			v, ok := pp.value(row, c, ctx)
			if !ok {
				v = pp.median[c]
			}
			o[k] = v
		}
		for k, c := range pp.indicator {
			if _, ok := pp.value(row, c, ctx); !ok {
				o[len(pp.cols)+k] = 1
			}
		}
	}
	return out
}

func (pp *prep) standardise(raw []float64, n int) []float64 {
	w := len(pp.mean)
	for i := range n {
		for c := range w {
			raw[i*w+c] = (raw[i*w+c] - pp.mean[c]) / pp.scale[c]
		}
	}
	return raw
}

// fitProjection keeps the leading principal axes of the standardised columns.
func (pp *prep) fitProjection(z []float64, n, w int) {
	var vals, vecs []float64
	if n < w {
		vals, vecs = dualAxes(z, n, w)
	} else {
		cov := gram(z, n, w)
		for e := range cov {
			cov[e] /= float64(n)
		}
		vals, vecs = symEigen(cov, w)
	}
	var tot float64
	for _, v := range vals {
		tot += max(v, 0)
	}
	k, acc := 0, 0.0
	for k < len(vals) && k < maxDirect && (k == 0 || acc < 0.995*tot) {
		acc += max(vals[k], 0)
		k++
	}
	pp.proj = vecs[:k*w]
	pp.outDim = k
}

// dualAxes returns the principal axes (rows of vecs) and variances of the
// n×w rows z when n < w, through the n×n matrix z·zᵀ/n: it has the same
// nonzero eigenvalues as the covariance, and axis k is zᵀ·u_k/√(n·λ_k).
// That costs O(n²·w + n³) instead of the covariance's O(w³): 40 rows of
// 2,000 columns took six minutes through the w×w Jacobi rotations. Axes
// past the rank (λ ≤ 0) are left zero.
func dualAxes(z []float64, n, w int) (vals, vecs []float64) {
	g := make([]float64, n*n)
	for i := range n {
		for j := 0; j <= i; j++ {
			s := dot(z[i*w:(i+1)*w], z[j*w:(j+1)*w]) / float64(n)
			g[i*n+j], g[j*n+i] = s, s
		}
	}
	vals, u := symEigen(g, n)
	vecs = make([]float64, n*w)
	for k := range n {
		if !(vals[k] > 0) {
			vals[k] = 0
			continue
		}
		s := 1 / math.Sqrt(float64(n)*vals[k])
		axis := vecs[k*w : (k+1)*w]
		for i := range n {
			c := u[k*n+i] * s
			for d, v := range z[i*w : (i+1)*w] {
				axis[d] += c * v
			}
		}
	}
	return vals, vecs
}

func (pp *prep) project(z []float64, n int) []float64 {
	w := len(pp.mean)
	out := make([]float64, n*pp.outDim)
	for i := range n {
		for a := range pp.outDim {
			out[i*pp.outDim+a] = dot(pp.proj[a*w:(a+1)*w], z[i*w:(i+1)*w])
		}
	}
	return out
}

// transform maps query rows into the model's feature space.
func (pp *prep) transform(X [][]float64) ([]float64, error) {
	return pp.transformRows(X, false)
}

// transformRows maps rows into the model's feature space; ctx says they
// are context rows (a window fitted like a base: FitLike).
func (pp *prep) transformRows(X [][]float64, ctx bool) ([]float64, error) {
	for i, row := range X {
		if len(row) != pp.inCols {
			return nil, fmt.Errorf("query row %d has %d features, the context has %d", i, len(row), pp.inCols)
		}
	}
	z := pp.standardise(pp.rawRows(X, ctx), len(X))
	if pp.proj != nil {
		z = pp.project(z, len(X))
	}
	return z, nil
}

// memoryBytes is what preprocessing holds for a context of n rows: the
// transformed context and the target, in float64.
func (pp *prep) memoryBytes(n int) int64 {
	return int64(n) * int64(pp.outDim+2) * 8
}
