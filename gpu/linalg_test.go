package gpu

import (
	"context"
	"fmt"
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

// forDotBlockPaths runs fn once per path of dotBlock this CPU has (Go,
// AVX2 FMA, AVX-512), logging the ones it lacks.
func forDotBlockPaths(t *testing.T, fn func(path string)) {
	saveFMA, saveAVX := dotBlockHasFMA, dotBlockHasAVX512
	defer func() { dotBlockHasFMA, dotBlockHasAVX512 = saveFMA, saveAVX }()
	for _, p := range []struct {
		name    string
		fma, av bool
		has     bool
	}{{"go", false, false, true}, {"avx2-fma", true, false, saveFMA}, {"avx512", true, true, saveAVX}} {
		if !p.has {
			t.Logf("%s: not in this build or CPU, not checked", p.name)
			continue
		}
		dotBlockHasFMA, dotBlockHasAVX512 = p.fma, p.av
		fn(p.name)
	}
}

// sameBitsOnCores runs fn on 1, 2 and 3 cores of a CorePool and fails
// unless every run gives the same bits.
func sameBitsOnCores(t *testing.T, what string, fn func(ctx context.Context) []float64) []float64 {
	var first []float64
	for _, cores := range []int{1, 2, 3} {
		ctx, leave, err := NewCorePool(cores).enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got := fn(ctx)
		leave()
		if first == nil {
			first = got
			continue
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(first[i]) {
				t.Fatalf("%s: element %d = %v on %d cores, %v on one", what, i, got[i], cores, first[i])
			}
		}
	}
	return first
}

// choleskyRef is the unblocked row-by-row Cholesky factorisation: the
// blocked one's twin.
func choleskyRef(a []float64, n int) {
	for j := range n {
		rj := a[j*n:]
		rj[j] = math.Sqrt(rj[j] - dot(rj[:j], rj[:j]))
		for i := j + 1; i < n; i++ {
			ri := a[i*n:]
			ri[j] = (ri[j] - dot(ri[:j], rj[:j])) / rj[j]
		}
	}
}

// The blocked Cholesky factor agrees with the unblocked one to rounding,
// on every dotBlock path, at sizes that leave every kind of partial tile
// and block; it is the same to the bit on every core count, and L·Lᵀ = A.
func TestCholeskyBlocked(t *testing.T) {
	forDotBlockPaths(t, func(path string) {
		for _, n := range []int{1, 2, 3, 5, 15, 16, 17, 49, 50, 53, 96, 131, 200} {
			orig := spd(n, uint64(n)+100)
			want := append([]float64(nil), orig...)
			choleskyRef(want, n)
			got := sameBitsOnCores(t, fmt.Sprintf("%s n=%d", path, n), func(ctx context.Context) []float64 {
				a := append([]float64(nil), orig...)
				if err := cholesky(ctx, a, n); err != nil {
					t.Fatal(err)
				}
				return a
			})
			for i := range n {
				for j := 0; j <= i; j++ {
					if d := math.Abs(got[i*n+j] - want[i*n+j]); d > 1e-11*(1+math.Abs(want[i*n+j])) {
						t.Fatalf("%s n=%d: L[%d][%d] = %v, unblocked %v", path, n, i, j, got[i*n+j], want[i*n+j])
					}
					if s := dot(got[i*n:i*n+j+1], got[j*n:j*n+j+1]); math.Abs(s-orig[i*n+j]) > 1e-9 {
						t.Fatalf("%s n=%d: (L·Lᵀ)[%d][%d] = %v, want %v", path, n, i, j, s, orig[i*n+j])
					}
				}
			}
		}
	})
}

// invLowerT agrees with column by column forward substitution to rounding,
// on every dotBlock path and at sizes with every kind of partial tile; the
// same bits on every core count; and it is L⁻¹: L·(L⁻¹) = I.
func TestInvLowerTTiles(t *testing.T) {
	forDotBlockPaths(t, func(path string) {
		for _, n := range []int{1, 2, 3, 4, 5, 7, 13, 16, 17, 29, 32, 47, 64, 65, 100, 203} {
			a := spd(n, uint64(n))
			if err := cholesky(context.Background(), a, n); err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			want := make([]float64, n*n)
			for j := range n {
				invLowerCol(a, n, want, j)
			}
			got := sameBitsOnCores(t, fmt.Sprintf("%s n=%d", path, n), func(ctx context.Context) []float64 {
				return invLowerT(ctx, a, n)
			})
			for i := range want {
				if d := math.Abs(got[i] - want[i]); d > 1e-11*(1+math.Abs(want[i])) {
					t.Fatalf("%s n=%d: element (%d, %d) = %v, column by column %v", path, n, i/n, i%n, got[i], want[i])
				}
			}
			for i := range n {
				for j := 0; j <= i; j++ {
					var s float64
					for k := j; k <= i; k++ {
						s += a[i*n+k] * got[j*n+k]
					}
					if w := map[bool]float64{true: 1}[i == j]; math.Abs(s-w) > 1e-8 {
						t.Fatalf("%s n=%d: (L·L⁻¹)[%d][%d] = %v", path, n, i, j, s)
					}
				}
			}
		}
	})
}

// invFull agrees with row-by-row dot products of L⁻¹'s columns to
// rounding, leaves the upper triangle zero, is the same on every core
// count, and its lower triangle mirrored is A⁻¹.
func TestInvFullTiles(t *testing.T) {
	forDotBlockPaths(t, func(path string) {
		for _, n := range []int{1, 3, 4, 5, 8, 9, 12, 13, 17, 31, 64, 101} {
			a := spd(n, uint64(n)+7)
			orig := append([]float64(nil), a...)
			if err := cholesky(context.Background(), a, n); err != nil {
				t.Fatal(err)
			}
			xt := invLowerT(context.Background(), a, n)
			got := sameBitsOnCores(t, fmt.Sprintf("%s n=%d", path, n), func(ctx context.Context) []float64 {
				return invFull(ctx, xt, n)
			})
			for r := range n {
				for c := 0; c <= r; c++ {
					want := dot(xt[r*n+r:r*n+n], xt[c*n+r:c*n+n])
					if d := math.Abs(got[r*n+c] - want); d > 1e-11*(1+math.Abs(want)) {
						t.Fatalf("%s n=%d: K⁻¹[%d][%d] = %v, row by row %v", path, n, r, c, got[r*n+c], want)
					}
					if c < r && got[c*n+r] != 0 {
						t.Fatalf("%s n=%d: upper triangle (%d, %d) = %v", path, n, c, r, got[c*n+r])
					}
					// (A·A⁻¹)[r][c] = δ.
					var s float64
					for k := range n {
						s += orig[r*n+k] * got[max(k, c)*n+min(k, c)]
					}
					if w := map[bool]float64{true: 1}[r == c]; math.Abs(s-w) > 1e-8 {
						t.Fatalf("%s n=%d: (A·A⁻¹)[%d][%d] = %v", path, n, r, c, s)
					}
				}
			}
		}
	})
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

// The Into forms give the same bits in a reused buffer full of NaNs as in a
// fresh one, wherever their callers read: L⁻¹ from each row's tile on, K⁻¹'s
// lower triangle.
func TestInvIntoReusedBuffers(t *testing.T) {
	for _, n := range []int{1, 6, 13, 64, 101} {
		a := spd(n, uint64(n)+11)
		if err := cholesky(context.Background(), a, n); err != nil {
			t.Fatal(err)
		}
		nan := func() []float64 {
			b := make([]float64, n*n)
			for i := range b {
				b[i] = math.NaN()
			}
			return b
		}
		want := invLowerT(context.Background(), a, n)
		got := invLowerTInto(context.Background(), a, n, nan())
		for j := range n {
			for i := j &^ 3; i < n; i++ {
				if math.Float64bits(got[j*n+i]) != math.Float64bits(want[j*n+i]) {
					t.Fatalf("n=%d: L⁻¹ row %d column %d = %v in a reused buffer, %v fresh", n, j, i, got[j*n+i], want[j*n+i])
				}
			}
		}
		wantInv := invFull(context.Background(), want, n)
		gotInv := invFullInto(context.Background(), got, n, nan())
		for r := range n {
			for c := 0; c <= r; c++ {
				if math.Float64bits(gotInv[r*n+c]) != math.Float64bits(wantInv[r*n+c]) {
					t.Fatalf("n=%d: K⁻¹[%d][%d] = %v in a reused buffer, %v fresh", n, r, c, gotInv[r*n+c], wantInv[r*n+c])
				}
			}
		}
	}
}

// invLowerCol solves column j of L⁻¹ into row j of xt: forward
// substitution column by column, the blocked solves' twin.
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

// cholSolve solves (L·Lᵀ)x = b: A·x = b to rounding, on sizes around the
// tile and block edges.
func TestCholSolve(t *testing.T) {
	for _, n := range []int{1, 2, 5, 33, 100} {
		a := spd(n, uint64(n)+40)
		orig := append([]float64(nil), a...)
		if err := cholesky(context.Background(), a, n); err != nil {
			t.Fatal(err)
		}
		b := make([]float64, n)
		for i := range b {
			b[i] = math.Sin(float64(i)) + 0.5
		}
		x := cholSolve(a, n, b)
		for i := range n {
			if r := dot(orig[i*n:(i+1)*n], x) - b[i]; math.Abs(r) > 1e-9 {
				t.Fatalf("n=%d: (A·x − b)[%d] = %v", n, i, r)
			}
		}
	}
}
