package gpu

import "math"

// trend is a ridge regression on the standardised features, optionally with
// their squares and pairwise products ("polynomial features where they
// help"): degree and ridge strength are chosen by the closed-form
// leave-one-out error on the context. It is removed from the target before
// the attention layers, which then model what a smooth global surface misses.
//
// Outside the box of the context's rows (per column, [lo, hi]) a quadratic
// trend does not follow its parabola, which turns back or runs away within
// a few spreads: it continues along its tangent at the nearest point of the
// box (a C¹ linear extension, like a natural spline's). A linear trend is
// unchanged.
//
// The squares and products are centred on their context means: the trend
// has no intercept (the standardised target's mean is 0), and an uncentred
// z² (mean 1) would have to stand for one, bending the fitted curvature.
type trend struct {
	degree int
	beta   []float64 // coefficients on expand(z); nil means the zero trend
	lo, hi []float64 // the context's range of each column
	centre []float64 // context mean of each square and product (degree 2)
}

// maxPolyDim caps the expanded width; wider inputs stay linear.
const maxPolyDim = 80

func (t *trend) expand(z []float64, out []float64) []float64 {
	out = append(out[:0], z...)
	if t.degree == 2 {
		k := 0
		for a := range z {
			for b := 0; b <= a; b++ {
				v := z[a] * z[b]
				if len(t.centre) > 0 {
					v -= t.centre[k]
				}
				out = append(out, v)
				k++
			}
		}
	}
	return out
}

// eval is the trend at z; buf is scratch of any length (reused if large
// enough).
func (t *trend) eval(z []float64, buf []float64) float64 {
	if t.beta == nil {
		return 0
	}
	if t.degree != 2 || t.inside(z) {
		buf = t.expand(z, buf)
		return dot(t.beta, buf)
	}
	f := len(z)
	if cap(buf) < 2*f {
		buf = make([]float64, 2*f)
	}
	zc, grad := buf[:f], buf[f:2*f]
	for d, v := range z {
		zc[d] = min(max(v, t.lo[d]), t.hi[d])
	}
	// Value and gradient of β·expand at zc: the linear part, then the
	// products z_a·z_b (b ≤ a) in expand's order.
	var v float64
	copy(grad, t.beta[:f])
	for d := range f {
		v += t.beta[d] * zc[d]
	}
	k := f
	for a := range f {
		for b := 0; b <= a; b++ {
			c := t.beta[k]
			v += c * zc[a] * zc[b]
			if len(t.centre) > 0 {
				v -= c * t.centre[k-f]
			}
			k++
			grad[a] += c * zc[b]
			grad[b] += c * zc[a]
		}
	}
	for d := range f {
		v += grad[d] * (z[d] - zc[d])
	}
	return v
}

// inside says whether z lies in the context's box.
func (t *trend) inside(z []float64) bool {
	for d, v := range z {
		if v < t.lo[d] || v > t.hi[d] {
			return false
		}
	}
	return true
}

// columnRanges is each column's least and greatest value over the n rows
// of z.
func columnRanges(z []float64, n, f int) (lo, hi []float64) {
	lo, hi = make([]float64, f), make([]float64, f)
	copy(lo, z[:f])
	copy(hi, z[:f])
	for i := 1; i < n; i++ {
		for d, v := range z[i*f : (i+1)*f] {
			lo[d], hi[d] = min(lo[d], v), max(hi[d], v)
		}
	}
	return lo, hi
}

// fitTrend returns the chosen trend with its leave-one-out and in-sample
// predictions on the context.
func fitTrend(z []float64, n, f int, y []float64) (*trend, []float64, []float64) {
	best := &trend{}
	bestLoo := make([]float64, n)
	bestFit := make([]float64, n)
	bestErr := dot(y, y) // the zero trend
	lo, hi := columnRanges(z, n, f)
	for _, deg := range []int{1, 2} {
		t := &trend{degree: deg}
		p := f
		if deg == 2 {
			p = f + f*(f+1)/2
			if p > maxPolyDim || n < 2*p {
				continue
			}
		}
		phi := make([]float64, n*p)
		var buf []float64
		for i := range n {
			buf = t.expand(z[i*f:(i+1)*f], buf)
			copy(phi[i*p:], buf)
		}
		if deg == 2 {
			t.centre = make([]float64, p-f)
			for i := range n {
				for k := range t.centre {
					t.centre[k] += phi[i*p+f+k] / float64(n)
				}
			}
			for i := range n {
				for k, m := range t.centre {
					phi[i*p+f+k] -= m
				}
			}
		}
		// Eigen-decompose ΦᵀΦ once; every ridge strength is then cheap.
		g := gram(phi, n, p)
		vals, vecs := symEigen(g, p)
		u := make([]float64, n*p) // Φ·v_k
		for i := range n {
			for k := range p {
				u[i*p+k] = dot(phi[i*p:(i+1)*p], vecs[k*p:(k+1)*p])
			}
		}
		uty := make([]float64, p)
		for i := range n {
			for k := range p {
				uty[k] += u[i*p+k] * y[i]
			}
		}
		for _, lam := range []float64{0.01, 0.1, 1, 3, 10, 30, 100, 300, 1000} {
			lam *= float64(n) / 100
			var errSum float64
			loo := make([]float64, n)
			fit := make([]float64, n)
			for i := range n {
				var pred, h float64
				for k := range p {
					d := max(vals[k], 0) + lam
					pred += u[i*p+k] * uty[k] / d
					h += u[i*p+k] * u[i*p+k] / d
				}
				e := (y[i] - pred) / (1 - h)
				errSum += e * e
				loo[i] = y[i] - e
				fit[i] = pred
			}
			if errSum < bestErr && !math.IsNaN(errSum) {
				bestErr = errSum
				beta := make([]float64, p)
				for k := range p {
					c := uty[k] / (max(vals[k], 0) + lam)
					for a := range p {
						beta[a] += c * vecs[k*p+a]
					}
				}
				best = &trend{degree: deg, beta: beta, lo: lo, hi: hi, centre: t.centre}
				bestLoo, bestFit = loo, fit
			}
		}
	}
	return best, bestLoo, bestFit
}
