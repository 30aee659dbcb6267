package gpu

import (
	"context"
	"errors"
	"math"
)

// errNotPositiveDefinite reports a kernel matrix that Cholesky cannot factor;
// callers add jitter and retry.
var errNotPositiveDefinite = errors.New("matrix is not positive definite")

// cholesky factors the symmetric positive-definite n×n row-major matrix a in
// place into its lower factor L (a = L·Lᵀ); the strict upper triangle is left
// as garbage. It is blocked and right-looking; each block of the trailing
// update is computed by one goroutine in a fixed order, so the bits do not
// depend on GOMAXPROCS. It stops with an error wrapping ctx.Err() once ctx
// ends.
func cholesky(ctx context.Context, a []float64, n int) error {
	const nb = 48
	for k := 0; k < n; k += nb {
		kb := min(nb, n-k)
		// Factor the diagonal block.
		for j := k; j < k+kb; j++ {
			rj := a[j*n:]
			d := rj[j] - dot(rj[k:j], rj[k:j])
			if !(d > 0) || math.IsInf(d, 0) {
				return errNotPositiveDefinite
			}
			d = math.Sqrt(d)
			rj[j] = d
			for i := j + 1; i < k+kb; i++ {
				ri := a[i*n:]
				ri[j] = (ri[j] - dot(ri[k:j], rj[k:j])) / d
			}
		}
		rest := n - k - kb
		if rest == 0 {
			break
		}
		// Panel: rows below the block solve against the block's factor.
		// Four rows at a time share each row of the block's factor (dot4;
		// a product's operands commute, so the bits are dot's).
		if err := parallelFor(ctx, rest, 32, func(lo, hi int) {
			i := k + kb + lo
			for ; i+4 <= k+kb+hi; i += 4 {
				r0, r1, r2, r3 := a[i*n:], a[(i+1)*n:], a[(i+2)*n:], a[(i+3)*n:]
				for j := k; j < k+kb; j++ {
					rj := a[j*n:]
					d0, d1, d2, d3 := dot4(rj[k:j], r0[k:j], r1[k:j], r2[k:j], r3[k:j])
					r0[j], r1[j], r2[j], r3[j] = (r0[j]-d0)/rj[j], (r1[j]-d1)/rj[j], (r2[j]-d2)/rj[j], (r3[j]-d3)/rj[j]
				}
			}
			for ; i < k+kb+hi; i++ {
				ri := a[i*n:]
				for j := k; j < k+kb; j++ {
					rj := a[j*n:]
					ri[j] = (ri[j] - dot(ri[k:j], rj[k:j])) / rj[j]
				}
			}
		}); err != nil {
			return err
		}
		// Trailing update of the lower triangle, against a contiguous copy of
		// the panel: row strides of a power-of-two n alias in the cache.
		panel := make([]float64, rest*kb)
		for i := range rest {
			copy(panel[i*kb:(i+1)*kb], a[(k+kb+i)*n+k:(k+kb+i)*n+k+kb])
		}
		if err := parallelFor(ctx, rest, 16, func(lo, hi int) {
			i := lo
			// Two rows against four panel rows per pass (dot2x4), then
			// each row's rest; every sum is dot's whichever path.
			for ; i+1 < hi; i += 2 {
				r0, r1 := a[(k+kb+i)*n+k+kb:], a[(k+kb+i+1)*n+k+kb:]
				p0, p1 := panel[i*kb:(i+1)*kb], panel[(i+1)*kb:(i+2)*kb]
				j := 0
				for ; j+4 <= i+1; j += 4 {
					d := dot2x4(p0, p1, panel[j*kb:], panel[(j+1)*kb:], panel[(j+2)*kb:], panel[(j+3)*kb:])
					for q := range 4 {
						r0[j+q] -= d[0][q]
						r1[j+q] -= d[1][q]
					}
				}
				trailingRow(r0, p0, panel, kb, i, j)
				trailingRow(r1, p1, panel, kb, i+1, j)
			}
			for ; i < hi; i++ {
				trailingRow(a[(k+kb+i)*n+k+kb:], panel[i*kb:(i+1)*kb], panel, kb, i, 0)
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// trailingRow subtracts from ri[j] the dot of panel rows i and j, for j
// from j0 to i.
func trailingRow(ri, pi, panel []float64, kb, i, j0 int) {
	j := j0
	for ; j+4 <= i+1; j += 4 {
		d0, d1, d2, d3 := dot4(pi, panel[j*kb:], panel[(j+1)*kb:], panel[(j+2)*kb:], panel[(j+3)*kb:])
		ri[j] -= d0
		ri[j+1] -= d1
		ri[j+2] -= d2
		ri[j+3] -= d3
	}
	for ; j <= i; j++ {
		ri[j] -= dot(pi, panel[j*kb:(j+1)*kb])
	}
}

// cholSolve solves (L·Lᵀ)x = b for x, given the lower factor in l.
func cholSolve(l []float64, n int, b []float64) []float64 {
	x := make([]float64, n)
	for i := range n {
		ri := l[i*n:]
		x[i] = (b[i] - dot(ri[:i], x[:i])) / ri[i]
	}
	for i := n - 1; i >= 0; i-- {
		s := x[i]
		for k := i + 1; k < n; k++ {
			s -= l[k*n+i] * x[k]
		}
		x[i] = s / l[i*n+i]
	}
	return x
}

// invLowerT returns the columns of L⁻¹ as rows: row j of the result holds
// column j of L⁻¹ (zero above j). Columns are independent, so they are
// solved in parallel, four at a time (invLowerT4). Once ctx ends the result
// is incomplete: callers check ctx before using it.
func invLowerT(ctx context.Context, l []float64, n int) []float64 {
	xt := make([]float64, n*n)
	// Pieces of 16 columns: four groups c, c+4, c+8, c+12.
	parallelFor(ctx, n, 16, func(lo, hi int) {
		for c := lo; c < lo+4 && c < hi; c++ {
			if c+12 < hi {
				invLowerT4(l, n, c, xt[c*n:(c+1)*n], xt[(c+4)*n:(c+5)*n], xt[(c+8)*n:(c+9)*n], xt[(c+12)*n:(c+13)*n])
				continue
			}
			for j := c; j < hi; j += 4 {
				invLowerCol(l, n, xt, j)
			}
		}
	})
	return xt
}

// invLowerCol solves column j of L⁻¹ into row j of xt.
func invLowerCol(l []float64, n int, xt []float64, j int) {
	invLowerColInto(l, n, xt[j*n:(j+1)*n], j)
}

// invLowerColInto solves column j of L⁻¹ into x[j:] (x[:j] is not read).
func invLowerColInto(l []float64, n int, x []float64, j int) {
	x[j] = 1 / l[j*n+j]
	for i := j + 1; i < n; i++ {
		ri := l[i*n:]
		x[i] = -dot(ri[j:i], x[j:i]) / ri[i]
	}
}

// invLowerT4 solves columns c, c+4, c+8 and c+12 of L⁻¹ together into
// x0…x3 (length n, zero from c on: zeroed by the caller), each
// bit-identical to invLowerCol's: every row of L is loaded once for the
// four dot products (dot4). Column c+4k's sums start at c instead of
// c+4k; its entries there are zero, so
// the extra products only add zeros to sums that are still +0, and since
// the start moved by a multiple of 4, every other product falls in the
// same running sum, in the same order, as dot's from c+4k.
func invLowerT4(l []float64, n, c int, x0, x1, x2, x3 []float64) {
	x0[c] = 1 / l[c*n+c]
	for i := c + 1; i < n; i++ {
		ri := l[i*n:]
		d0, d1, d2, d3 := dot4(ri[c:i], x0[c:i], x1[c:i], x2[c:i], x3[c:i])
		x0[i] = -d0 / ri[i]
		switch {
		case i > c+12:
			x1[i], x2[i], x3[i] = -d1/ri[i], -d2/ri[i], -d3/ri[i]
		case i > c+8:
			x1[i], x2[i] = -d1/ri[i], -d2/ri[i]
			if i == c+12 {
				x3[i] = 1 / ri[i]
			}
		case i > c+4:
			x1[i] = -d1 / ri[i]
			if i == c+8 {
				x2[i] = 1 / ri[i]
			}
		case i == c+4:
			x1[i] = 1 / ri[i]
		}
	}
}

// gram returns XᵀX for the n×w row-major X, as a dense symmetric w×w
// matrix (the lower triangle summed row by row, then mirrored).
func gram(x []float64, n, w int) []float64 {
	g := make([]float64, w*w)
	for i := range n {
		r := x[i*w : (i+1)*w]
		for a := range w {
			for b := 0; b <= a; b++ {
				g[a*w+b] += r[a] * r[b]
			}
		}
	}
	for a := range w {
		for b := 0; b < a; b++ {
			g[b*w+a] = g[a*w+b]
		}
	}
	return g
}

// invDiag returns diag((L·Lᵀ)⁻¹): the squared norms of the columns of L⁻¹.
func invDiag(xt []float64, n int) []float64 {
	d := make([]float64, n)
	for j := range n {
		c := xt[j*n+j : j*n+n]
		d[j] = dot(c, c)
	}
	return d
}

// invFullRow fills row a of K⁻¹ from column b0 to the diagonal.
func invFullRow(inv, xt []float64, n, a, b0 int) {
	// Column a of L⁻¹ is zero above a, so the sums start at a.
	ra := xt[a*n+a : a*n+n]
	b := b0
	for ; b+4 <= a+1; b += 4 {
		inv[a*n+b], inv[a*n+b+1], inv[a*n+b+2], inv[a*n+b+3] = dot4(ra,
			xt[b*n+a:], xt[(b+1)*n+a:], xt[(b+2)*n+a:], xt[(b+3)*n+a:])
	}
	for ; b <= a; b++ {
		inv[a*n+b] = dot(ra, xt[b*n+a:b*n+n])
	}
}

// invFull returns (L·Lᵀ)⁻¹ = L⁻ᵀL⁻¹ as a dense symmetric row-major matrix.
// Once ctx ends the result is incomplete: callers check ctx before using it.
func invFull(ctx context.Context, xt []float64, n int) []float64 {
	inv := make([]float64, n*n)
	// Pieces of 8 rows: rows a and a+4 share the columns b (dot2x4). Row
	// a+4's sums then start at a, where column a+4 of L⁻¹ holds four
	// zeros: they add only zeros to sums still +0, and the start moved by
	// 4, so each sum is dot's from a+4 to the bit (as in invLowerT4).
	parallelFor(ctx, n, 8, func(lo, hi int) {
		for a := lo; a < hi; a++ {
			if a < lo+4 && a+4 < hi {
				ra, r4 := xt[a*n+a:a*n+n], xt[(a+4)*n+a:(a+4)*n+n]
				b := 0
				for ; b+4 <= a+1; b += 4 {
					d := dot2x4(ra, r4, xt[b*n+a:], xt[(b+1)*n+a:], xt[(b+2)*n+a:], xt[(b+3)*n+a:])
					copy(inv[a*n+b:a*n+b+4], d[0][:])
					copy(inv[(a+4)*n+b:(a+4)*n+b+4], d[1][:])
				}
				invFullRow(inv, xt, n, a, b)
				invFullRow(inv, xt, n, a+4, b)
				continue
			}
			if a >= lo+4 && a-4 >= lo {
				continue // done with row a−4
			}
			invFullRow(inv, xt, n, a, 0)
		}
	})
	for a := range n {
		for b := a + 1; b < n; b++ {
			inv[a*n+b] = inv[b*n+a]
		}
	}
	return inv
}
