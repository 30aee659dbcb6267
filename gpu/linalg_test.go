package gpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// spd is a random symmetric positive-definite n×n matrix, row-major.
func spd(n int, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]float64, n*n)
	for i := range b {
		b[i] = r.NormFloat64()
	}
	a := make([]float64, n*n)
	for i := range n {
		for j := range n {
			a[i*n+j] = dot(b[i*n:(i+1)*n], b[j*n:(j+1)*n]) / float64(n)
		}
		a[i*n+i] += 0.1
	}
	return a
}

// invLowerT, four columns at a time, gives column by column's bits, at
// sizes that leave every kind of incomplete group, on every core count.
func TestInvLowerTBitIdentical(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 7, 13, 16, 17, 29, 32, 47, 64, 65, 100, 203} {
		a := spd(n, uint64(n))
		if err := cholesky(context.Background(), a, n); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		want := make([]float64, n*n)
		for j := range n {
			invLowerCol(a, n, want, j)
		}
		for _, cores := range []int{1, 2, 4} {
			ctx, leave, err := NewCorePool(cores).enter(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := invLowerT(ctx, a, n)
			leave()
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n=%d cores=%d: element (%d, %d) = %v, column by column %v", n, cores, i/n, i%n, got[i], want[i])
				}
			}
		}
		// And it is L⁻¹: L·(L⁻¹) = I.
		for i := range n {
			for j := 0; j <= i; j++ {
				var s float64
				for k := j; k <= i; k++ {
					s += a[i*n+k] * want[j*n+k]
				}
				if w := map[bool]float64{true: 1}[i == j]; math.Abs(s-w) > 1e-8 {
					t.Fatalf("n=%d: (L·L⁻¹)[%d][%d] = %v", n, i, j, s)
				}
			}
		}
	}
}

// cholesky's panel, four rows at a time, gives the bits of the row by row
// solve: the factor matches an unblocked row-by-row Cholesky's exactly
// where both sum in dot's order (the diagonal block), and L·Lᵀ = A.
func TestCholeskyPanelBitIdentical(t *testing.T) {
	for _, n := range []int{5, 49, 50, 53, 96, 131, 200} {
		a := spd(n, uint64(n)+100)
		orig := append([]float64(nil), a...)
		want := append([]float64(nil), a...)
		// The same blocked factorisation with the panel row by row.
		choleskyRowPanel(want, n)
		for _, cores := range []int{1, 3} {
			got := append([]float64(nil), orig...)
			ctx, leave, err := NewCorePool(cores).enter(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := cholesky(ctx, got, n); err != nil {
				t.Fatal(err)
			}
			leave()
			for i := range n {
				for j := 0; j <= i; j++ {
					if math.Float64bits(got[i*n+j]) != math.Float64bits(want[i*n+j]) {
						t.Fatalf("n=%d cores=%d: L[%d][%d] = %v, row by row %v", n, cores, i, j, got[i*n+j], want[i*n+j])
					}
				}
			}
		}
		for i := range n {
			for j := 0; j <= i; j++ {
				if s := dot(want[i*n:i*n+j+1], want[j*n:j*n+j+1]); math.Abs(s-orig[i*n+j]) > 1e-9 {
					t.Fatalf("n=%d: (L·Lᵀ)[%d][%d] = %v, want %v", n, i, j, s, orig[i*n+j])
				}
			}
		}
	}
}

// choleskyRowPanel is cholesky as it was before its panel took four rows at
// a time: the test's twin.
func choleskyRowPanel(a []float64, n int) {
	const nb = 48
	for k := 0; k < n; k += nb {
		kb := min(nb, n-k)
		for j := k; j < k+kb; j++ {
			rj := a[j*n:]
			rj[j] = math.Sqrt(rj[j] - dot(rj[k:j], rj[k:j]))
			for i := j + 1; i < k+kb; i++ {
				ri := a[i*n:]
				ri[j] = (ri[j] - dot(ri[k:j], rj[k:j])) / rj[j]
			}
		}
		rest := n - k - kb
		for i := k + kb; i < n; i++ {
			ri := a[i*n:]
			for j := k; j < k+kb; j++ {
				rj := a[j*n:]
				ri[j] = (ri[j] - dot(ri[k:j], rj[k:j])) / rj[j]
			}
		}
		for i := range rest {
			ri := a[(k+kb+i)*n+k+kb:]
			pi := a[(k+kb+i)*n+k : (k+kb+i)*n+k+kb]
			for j := 0; j <= i; j++ {
				ri[j] -= dot(pi, a[(k+kb+j)*n+k:(k+kb+j)*n+k+kb])
			}
		}
	}
}

// invFull, pairing rows a and a+4, gives the row-by-row bits.
func TestInvFullBitIdentical(t *testing.T) {
	for _, n := range []int{1, 3, 4, 5, 8, 9, 12, 13, 17, 31, 64, 101} {
		a := spd(n, uint64(n)+7)
		if err := cholesky(context.Background(), a, n); err != nil {
			t.Fatal(err)
		}
		xt := invLowerT(context.Background(), a, n)
		want := make([]float64, n*n)
		for r := range n {
			invFullRow(want, xt, n, r, 0)
		}
		for _, cores := range []int{1, 2} {
			ctx, leave, err := NewCorePool(cores).enter(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := invFull(ctx, xt, n)
			leave()
			for r := range n {
				for c := 0; c <= r; c++ {
					if math.Float64bits(got[r*n+c]) != math.Float64bits(want[r*n+c]) {
						t.Fatalf("n=%d cores=%d: K⁻¹[%d][%d] = %v, row by row %v", n, cores, r, c, got[r*n+c], want[r*n+c])
					}
					if got[c*n+r] != got[r*n+c] {
						t.Fatalf("n=%d: K⁻¹ not symmetric at (%d, %d)", n, r, c)
					}
				}
			}
		}
	}
}

// looColumns solves a subset of the columns of L⁻¹, four at a time from
// the first of each four, and agrees with column by column to rounding:
// subsets with gaps, runs, a last group of one to three, and duplicates of
// none.
func TestLooColumnsMatchesColumns(t *testing.T) {
	for _, n := range []int{1, 5, 17, 64, 203} {
		a := spd(n, uint64(n)+7)
		if err := cholesky(context.Background(), a, n); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for _, every := range []int{1, 3, 5} {
			var cols []int
			for j := 0; j < n; j += every {
				cols = append(cols, j)
			}
			seen := make([]bool, n) // each call writes its own column's
			err := looColumns(context.Background(), a, n, cols, func(j int, x []float64) {
				seen[j] = true
				want := make([]float64, n)
				invLowerColInto(a, n, want, j)
				for i := j; i < n; i++ {
					if d := math.Abs(x[i] - want[i]); d > 1e-10*(1+math.Abs(want[i])) {
						t.Errorf("n=%d every=%d: column %d row %d = %v, column by column %v", n, every, j, i, x[i], want[i])
						return
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range cols {
				if !seen[j] {
					t.Errorf("n=%d every=%d: column %d not solved", n, every, j)
				}
			}
		}
	}
}
