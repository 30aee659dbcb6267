package gpu

import "math"

// trend is a ridge regression on the standardised features, optionally with
// their squares and pairwise products ("polynomial features where they
// help"): degree and ridge strength are chosen by the closed-form
// leave-one-out error on the context. It is removed from the target before
// the attention layers, which then model what a smooth global surface misses.
type trend struct {
	degree int
	beta   []float64 // coefficients on expand(z); nil means the zero trend
}

// maxPolyDim caps the expanded width; wider inputs stay linear.
const maxPolyDim = 80

func (t *trend) expand(z []float64, out []float64) []float64 {
	out = append(out[:0], z...)
	if t.degree == 2 {
		for a := range z {
			for b := 0; b <= a; b++ {
				out = append(out, z[a]*z[b])
			}
		}
	}
	return out
}

func (t *trend) eval(z []float64, buf []float64) float64 {
	if t.beta == nil {
		return 0
	}
	buf = t.expand(z, buf)
	return dot(t.beta, buf)
}

// fitTrend returns the chosen trend with its leave-one-out and in-sample
// predictions on the context.
func fitTrend(z []float64, n, f int, y []float64) (*trend, []float64, []float64) {
	best := &trend{}
	bestLoo := make([]float64, n)
	bestFit := make([]float64, n)
	bestErr := dot(y, y) // the zero trend
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
				best = &trend{degree: deg, beta: beta}
				bestLoo, bestFit = loo, fit
			}
		}
	}
	return best, bestLoo, bestFit
}
