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
	var c [4]int
	var x [4][]float64
	for q := range 4 {
		c[q] = min(c0+q, n-1)
		x[q] = xt[c[q]*n : (c[q]+1)*n]
	}
	invLowerCols(l, n, c, &x)
}

// invLowerCols solves columns c[0] ≤ c[1] ≤ c[2] ≤ c[3] of L⁻¹ into x[0…3]
// (length n each) from c[0] on: entries from c[0] to c[q] are set to zero.
// It sweeps the rows four at a time: the products with the rows already
// solved are one dotBlock (column c[q]'s zeros before c[q] only add zeros),
// the 4×4 triangle within the rows is finished in order. A column repeated
// (c[q] = c[q−1]) is solved once, into x[q−1]: x[q] is not written.
func invLowerCols(l []float64, n int, c [4]int, x *[4][]float64) {
	c0 := c[0]
	var solve [4]bool
	for q := range 4 {
		solve[q] = q == 0 || c[q] != c[q-1]
		if solve[q] {
			clear(x[q][c0:c[q]])
		}
	}
	var ra, rb [4][]float64
	var out [16]float64
	for i0 := c0; i0 < n; i0 += 4 {
		if k := i0 - c0; k > 0 {
			for q := range 4 {
				ra[q] = l[min(i0+q, n-1)*n+c0:]
				rb[q] = x[q][c0:]
			}
			dotBlock(&ra, &rb, k, &out)
		}
		for r := 0; r < 4 && i0+r < n; r++ {
			i := i0 + r
			li := l[i*n:]
			for q := range 4 {
				cq, xq := c[q], x[q]
				switch {
				case !solve[q] || i < cq:
				case i == cq:
					xq[i] = 1 / li[i]
				default:
					var s float64
					if i0 > c0 {
						s = out[4*r+q]
					}
					for t := max(i0, cq); t < i; t++ {
						s += li[t] * xq[t]
					}
					xq[i] = -s / li[i]
				}
			}
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
