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
		if c0 < i0 && i0+4 <= n {
			cholSolveTile(a, n, i0, c0, &out)
			continue
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

// cholSolveTile is cholRowTile's solve of a whole tile below the diagonal
// (rows i0…i0+3 all below n, columns c0…c0+3 before i0): the block's 4×4
// factor is loaded once and its diagonal inverted once for the four rows,
// which then multiply (a division per entry was a third of the
// factorisation's time at 800 rows).
func cholSolveTile(a []float64, n, i0, c0 int, out *[16]float64) {
	l0 := a[c0*n+c0 : c0*n+c0+1]
	l1 := a[(c0+1)*n+c0 : (c0+1)*n+c0+2]
	l2 := a[(c0+2)*n+c0 : (c0+2)*n+c0+3]
	l3 := a[(c0+3)*n+c0 : (c0+3)*n+c0+4]
	d0, d1, d2, d3 := 1/l0[0], 1/l1[1], 1/l2[2], 1/l3[3]
	for r := range 4 {
		ri := a[(i0+r)*n+c0 : (i0+r)*n+c0+4]
		o := out[4*r : 4*r+4]
		x0 := (ri[0] - o[0]) * d0
		x1 := (ri[1] - o[1] - x0*l1[0]) * d1
		x2 := (ri[2] - o[2] - x0*l2[0] - x1*l2[1]) * d2
		x3 := (ri[3] - o[3] - x0*l3[0] - x1*l3[1] - x2*l3[2]) * d3
		ri[0], ri[1], ri[2], ri[3] = x0, x1, x2, x3
	}
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
		if i0 > c[3] && i0+4 <= n {
			invLowerRows(l, n, i0, c0, x, &out)
			continue
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

// invLowerRows is invLowerCols' step for four whole rows i0…i0+3 below
// every column: each row's 4×4 block of L is loaded once and its diagonal
// inverted once for the four columns, which then multiply. out holds the
// products with rows c0…i0−1 (none where i0 = c0).
func invLowerRows(l []float64, n, i0, c0 int, x *[4][]float64, out *[16]float64) {
	var s [16]float64
	if i0 > c0 {
		s = *out
	}
	x0, x1, x2, x3 := x[0][i0:i0+4], x[1][i0:i0+4], x[2][i0:i0+4], x[3][i0:i0+4]
	for r := range 4 {
		li := l[(i0+r)*n+i0 : (i0+r)*n+i0+4]
		s0, s1, s2, s3 := s[4*r], s[4*r+1], s[4*r+2], s[4*r+3]
		for t := range r {
			s0 += li[t] * x0[t]
			s1 += li[t] * x1[t]
			s2 += li[t] * x2[t]
			s3 += li[t] * x3[t]
		}
		d := -1 / li[r]
		x0[r], x1[r], x2[r], x3[r] = s0*d, s1*d, s2*d, s3*d
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
