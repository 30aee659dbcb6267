package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// wideRows returns n random rows of p columns driven by two factors, plus
// noise of the given deviation: a covariance with two large eigenvalues.
func wideRows(r *rand.Rand, n, p int, noise float64) []float64 {
	z := make([]float64, n*p)
	for i := range n {
		a, b := r.NormFloat64()*3, r.NormFloat64()
		for d := range p {
			z[i*p+d] = a*math.Sin(float64(d)) + b*math.Cos(float64(d)/3) + noise*r.NormFloat64()
		}
	}
	return z
}

// randomCov returns the covariance of n wideRows of p columns.
func randomCov(r *rand.Rand, n, p int) []float64 {
	cov := gram(wideRows(r, n, p, 0.3), n, p)
	for e := range cov {
		cov[e] /= float64(n)
	}
	return cov
}

// The QR path used above jacobiMax agrees with the Jacobi rotations: same
// descending eigenvalues, the same axes up to sign, and A·v = λ·v.
func TestSymEigenQRMatchesJacobi(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const p = 150
	a := randomCov(r, 400, p)
	jv, jvec := symEigenJacobi(a, p)
	qv, qvec := symEigen(a, p)
	for k := range p {
		if math.Abs(jv[k]-qv[k]) > 1e-9*jv[0] {
			t.Fatalf("eigenvalue %d: %g by Jacobi, %g by QR", k, jv[k], qv[k])
		}
		if k > 0 && qv[k] > qv[k-1] {
			t.Fatalf("eigenvalues not descending at %d: %g after %g", k, qv[k], qv[k-1])
		}
	}
	for k := range 10 { // the leading, well-separated axes
		if c := math.Abs(dot(jvec[k*p:(k+1)*p], qvec[k*p:(k+1)*p])); math.Abs(c-1) > 1e-6 {
			t.Errorf("axis %d: |cos| = %g between Jacobi and QR", k, c)
		}
	}
	for k := range p {
		v := qvec[k*p : (k+1)*p]
		for i := range p {
			if d := dot(a[i*p:(i+1)*p], v) - qv[k]*v[i]; math.Abs(d) > 1e-9*jv[0] {
				t.Fatalf("axis %d row %d: A·v − λ·v = %g", k, i, d)
			}
		}
	}
}

// BenchmarkSymEigen times both paths on the covariance of wide inputs.
func BenchmarkSymEigen(b *testing.B) {
	for _, p := range []int{150, 500} {
		a := randomCov(rand.New(rand.NewPCG(7, 8)), 2*p, p)
		b.Run(fmt.Sprintf("qr/%d", p), func(b *testing.B) {
			for b.Loop() {
				symEigenQR(a, p)
			}
		})
		b.Run(fmt.Sprintf("jacobi/%d", p), func(b *testing.B) {
			for b.Loop() {
				symEigenJacobi(a, p)
			}
		})
	}
}
