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
// as garbage. It is left-looking by 4×4 tiles: tile (i0, c0) of L is a's
// tile less the products of rows i0… and c0… over every column before c0,
// one dotBlock (long sums, FMA), then a 4×4 triangular solve (or, on the
// diagonal, a 4×4 factorisation). Row tiles are done cholBlock rows at a
// time: the block's own rows in order, then the rows below it in parallel
// up to the block's last column. Each tile is computed by one goroutine in a
// fixed order, so the bits do not depend on GOMAXPROCS. It stops with an
// error wrapping ctx.Err() once ctx ends.
func cholesky(ctx context.Context, a []float64, n int) error {
	for j0 := 0; j0 < n; j0 += cholBlock {
		jb := min(cholBlock, n-j0)
		for i0 := j0; i0 < j0+jb; i0 += 4 {
			if !cholRowTile(a, n, i0, j0, i0+4) {
				return errNotPositiveDefinite
			}
		}
		rest := n - j0 - jb
		if rest == 0 {
			break
		}
		if err := parallelFor(ctx, (rest+3)/4, 4, func(lo, hi int) {
			for t := lo; t < hi; t++ {
				cholRowTile(a, n, j0+jb+4*t, j0, j0+jb)
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// cholBlock is how many rows of cholesky's factor are finished before the
// rows below catch up with them (a multiple of 4): wide enough that the
// cores meet rarely, narrow enough that its serial share stays small.
const cholBlock = 32

// cholRowTile computes columns [c0, min(c1, i0+4)) of rows i0…i0+3 (those
// below n) of the Cholesky factor, c0 and c1 multiples of 4, from a's entries
// and the factor's columns before c0 in these rows and its rows above. A
// tile reaching the diagonal is factored; it reports false where a pivot is
// not positive. Rows past n are read as row n−1 and dropped.
func cholRowTile(a []float64, n, i0, c0, c1 int) bool {
	var ra, rb [4][]float64
	var out [16]float64
	for q := range 4 {
		ra[q] = a[min(i0+q, n-1)*n:]
	}
	for c0 := c0; c0 < c1 && c0 <= i0; c0 += 4 {
		if c0 > 0 {
			for q := range 4 {
				rb[q] = a[min(c0+q, n-1)*n:]
			}
			ra2 := ra
			dotBlock(&ra2, &rb, c0, &out)
		} else {
			out = [16]float64{}
		}
		for r := 0; r < 4 && i0+r < n; r++ {
			i := i0 + r
			ri := a[i*n:]
			for q := 0; q < 4 && c0+q < n && c0+q <= i; q++ {
				c := c0 + q
				rc := a[c*n:]
				s := ri[c] - out[4*r+q]
				for t := c0; t < c; t++ {
					s -= ri[t] * rc[t]
				}
				if c < i {
					ri[c] = s / rc[c]
					continue
				}
				if !(s > 0) || math.IsInf(s, 0) {
					return false
				}
				ri[c] = math.Sqrt(s)
			}
		}
	}
	return true
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
// column j of L⁻¹ (zero above j). Columns are independent: four at a time
// (a tile), in parallel, each swept down the rows four at a time, where the
// products with the rows already solved are one dotBlock and the 4×4
// triangle within the tile is finished in order. Once ctx ends the result
// is incomplete: callers check ctx before using it.
func invLowerT(ctx context.Context, l []float64, n int) []float64 {
	return invLowerTInto(ctx, l, n, make([]float64, n*n))
}

// invLowerTInto is invLowerT into xt (n×n), whose entries left of each
// row's tile (columns before 4⌊j/4⌋ in row j) it neither reads nor writes:
// they stay as they were.
func invLowerTInto(ctx context.Context, l []float64, n int, xt []float64) []float64 {
	parallelFor(ctx, (n+3)/4, 1, func(lo, hi int) {
		for ct := lo; ct < hi; ct++ {
			invLowerTile(l, n, xt, 4*ct)
		}
	})
	return xt
}

// invLowerTile solves columns c0…c0+3 (those below n) of L⁻¹ into rows
// c0…c0+3 of xt from column c0 on (zero above the diagonal).
func invLowerTile(l []float64, n int, xt []float64, c0 int) {
	var ra, rb [4][]float64
	var out [16]float64
	for c := c0; c < min(c0+4, n); c++ {
		clear(xt[c*n+c0 : c*n+c])
	}
	for i0 := c0; i0 < n; i0 += 4 {
		// Column c of L⁻¹ is zero above c, so the sums of every column in
		// the tile may start at c0.
		if k := i0 - c0; k > 0 {
			for q := range 4 {
				ra[q] = l[min(i0+q, n-1)*n+c0:]
				rb[q] = xt[min(c0+q, n-1)*n+c0:]
			}
			dotBlock(&ra, &rb, k, &out)
		}
		for r := 0; r < 4 && i0+r < n; r++ {
			i := i0 + r
			li := l[i*n:]
			for q := 0; q < 4 && c0+q < n; q++ {
				c := c0 + q
				x := xt[c*n:]
				switch {
				case i < c:
				case i == c:
					x[c] = 1 / li[i]
				default:
					var s float64
					if i0 > c0 {
						s = out[4*r+q]
					}
					for t := max(i0, c); t < i; t++ {
						s += li[t] * x[t]
					}
					x[i] = -s / li[i]
				}
			}
		}
	}
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

// invFull returns the lower triangle (diagonal included) of (L·Lᵀ)⁻¹ =
// L⁻ᵀL⁻¹, row-major, the strict upper triangle zero, from xt (invLowerT's
// rows; row j is read from column 4⌊j/4⌋ on): entry (a, b), b ≤ a, is the
// dot of rows a and b of xt from a on, 4×4 at a time (dotBlock). The GP
// gradient reads the lower triangle only (K⁻¹ is symmetric). Once ctx ends
// the result is incomplete: callers check ctx before using it.
func invFull(ctx context.Context, xt []float64, n int) []float64 {
	return invFullInto(ctx, xt, n, make([]float64, n*n))
}

// invFullInto is invFull into inv (n×n), whose strict upper triangle it
// leaves as it was.
func invFullInto(ctx context.Context, xt []float64, n int, inv []float64) []float64 {
	parallelFor(ctx, (n+3)/4, 1, func(lo, hi int) {
		var ra, rb [4][]float64
		var out [16]float64
		for at := lo; at < hi; at++ {
			a0 := 4 * at
			for q := range 4 {
				ra[q] = xt[min(a0+q, n-1)*n+a0:]
			}
			for b0 := 0; b0 <= a0; b0 += 4 {
				ra2 := ra
				for q := range 4 {
					rb[q] = xt[min(b0+q, n-1)*n+a0:]
				}
				dotBlock(&ra2, &rb, n-a0, &out)
				for r := 0; r < 4 && a0+r < n; r++ {
					for q := 0; q < 4 && b0+q <= a0+r; q++ {
						inv[(a0+r)*n+b0+q] = out[4*r+q]
					}
				}
			}
		}
	})
	return inv
}
