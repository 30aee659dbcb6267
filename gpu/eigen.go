package gpu

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/mat"
)

// jacobiMax is the largest matrix symEigen diagonalises by Jacobi rotations.
// Their cost is about 10 sweeps of 3p³ flops: fine for feature counts and
// the trend's small systems, minutes for the covariance of 2,000 columns.
const jacobiMax = 128

// symEigen returns the eigenvalues (descending) and eigenvectors (as rows of
// vecs, same order) of the symmetric p×p row-major matrix a. Up to jacobiMax
// it uses cyclic Jacobi rotations, whose fixed sweep order makes the results
// reproducible bit for bit; above, LAPACK's tridiagonal QR (gonum's dsyev,
// about (4/3)p³ flops for the reduction): 2,000 columns take seconds, not
// minutes.
func symEigen(a []float64, p int) (vals []float64, vecs []float64) {
	if p > jacobiMax {
		return symEigenQR(a, p)
	}
	return symEigenJacobi(a, p)
}

// symEigenQR is symEigen through gonum's EigenSym. Should the QR iteration
// fail to converge (it does not for finite symmetric input), it falls back
// to Jacobi rotations rather than return nothing.
func symEigenQR(a []float64, p int) (vals []float64, vecs []float64) {
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(p, append([]float64(nil), a...)), true) {
		return symEigenJacobi(a, p)
	}
	asc := es.Values(nil)
	var ev mat.Dense
	es.VectorsTo(&ev)
	vals = make([]float64, p)
	vecs = make([]float64, p*p)
	for r := range p {
		i := p - 1 - r // ascending → descending
		vals[r] = asc[i]
		for k := range p {
			vecs[r*p+k] = ev.At(k, i)
		}
	}
	return vals, vecs
}

// symEigenJacobi is symEigen by cyclic Jacobi rotations.
func symEigenJacobi(a []float64, p int) (vals []float64, vecs []float64) {
	m := append([]float64(nil), a...)
	v := make([]float64, p*p)
	for i := range p {
		v[i*p+i] = 1
	}
	for sweep := 0; sweep < 100; sweep++ {
		var off, tot float64
		for i := range p {
			for j := range p {
				if i != j {
					off += m[i*p+j] * m[i*p+j]
				}
				tot += m[i*p+j] * m[i*p+j]
			}
		}
		if off <= 1e-30*tot || off == 0 {
			break
		}
		for i := 0; i < p; i++ {
			for j := i + 1; j < p; j++ {
				apq := m[i*p+j]
				if apq == 0 {
					continue
				}
				theta := (m[j*p+j] - m[i*p+i]) / (2 * apq)
				t := math.Copysign(1, theta) / (math.Abs(theta) + math.Sqrt(theta*theta+1))
				c := 1 / math.Sqrt(t*t+1)
				s := t * c
				for k := range p {
					mki, mkj := m[k*p+i], m[k*p+j]
					m[k*p+i] = c*mki - s*mkj
					m[k*p+j] = s*mki + c*mkj
				}
				for k := range p {
					mik, mjk := m[i*p+k], m[j*p+k]
					m[i*p+k] = c*mik - s*mjk
					m[j*p+k] = s*mik + c*mjk
				}
				for k := range p {
					vki, vkj := v[k*p+i], v[k*p+j]
					v[k*p+i] = c*vki - s*vkj
					v[k*p+j] = s*vki + c*vkj
				}
			}
		}
	}
	idx := make([]int, p)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool { return m[idx[x]*p+idx[x]] > m[idx[y]*p+idx[y]] })
	vals = make([]float64, p)
	vecs = make([]float64, p*p)
	for r, i := range idx {
		vals[r] = m[i*p+i]
		for k := range p {
			vecs[r*p+k] = v[k*p+i]
		}
	}
	return vals, vecs
}
