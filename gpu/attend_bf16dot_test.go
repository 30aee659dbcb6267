package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// dotCases runs f on random bf16 score cases over group counts (full runs
// of four groups, tails of one to three) and row counts that leave a tail
// after the 4-row unroll, with several anchor blocks.
func dotCases(t *testing.T, f func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32)) {
	r := rand.New(rand.NewPCG(16, 3))
	for g := 1; g <= 17; g++ {
		for _, n := range []int{1, 4, 5, 31, 33, 70, 101} {
			nq := 1 + (g+n)%scoreTile
			t.Run(fmt.Sprintf("g=%d/n=%d/q=%d", g, n, nq), func(t *testing.T) {
				c, rv, qks := randomScoreCase(r, CacheDTypeBF16, n, g, nq)
				f(t, c, rv, qks)
			})
		}
	}
}

// dotBounds gives, for query q's entry of head h (0–11) and row i, the
// float64 distance from the query as the dot form holds it (hi+lo) to the
// stored keys, and bf16DotTolerance for that entry.
func dotBounds(c *contextFit, rv *rowView, qk []float32, h, i int) (ref, tol float64, hi, lo []uint16) {
	n, qw := c.n, c.g*quadWidth
	nb := (n + anchorBlock - 1) / anchorBlock
	qd, hh, b := h/quadHeads, h%quadHeads, i/anchorBlock
	src := qk[qd*nb*qw+b*qw:][:qw]
	bq := bf16Query{hi: make([]uint16, qw), lo: make([]uint16, qw), qn: make([]float32, quadHeads)}
	makeBF16Query(&bq, src, qw)
	at := rv.s.quadRun(qd, i)
	k := rv.s.kb[at : at+qw]
	for e := 2 * hh; e < qw; e += quadWidth {
		for cc := range 2 {
			d := float64(dazBF16(bq.hi[e+cc])) + float64(dazBF16(bq.lo[e+cc])) - float64(dazBF16(k[e+cc]))
			ref += d * d
		}
	}
	return ref, bf16DotTolerance(k, bq.hi, bq.lo, hh) / 2, bq.hi, bq.lo
}

// TestBF16DotTwinAccuracy holds the dot form's Go twin to the float64
// distance from the query as it holds it (within bf16DotTolerance's
// one-sided bound) and to the difference form (within that plus the
// query's representation error: |q − (hi+lo)| ≤ 2⁻¹⁶|q| a coordinate, and
// the difference form's own float32 rounding). It runs everywhere.
func TestBF16DotTwinAccuracy(t *testing.T) {
	dotCases(t, func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32) {
		got := runScores(c, bf16DotKernel, rv, qks)
		diff := runScores(c, portableKernel, rv, qks)
		n, qw := c.n, c.g*quadWidth
		nb := (n + anchorBlock - 1) / anchorBlock
		for q := range qks {
			for h := range headsPerLayer {
				for i := range n {
					v := float64(got[q][h*n+i])
					ref, tol, _, _ := dotBounds(c, rv, qks[q], h, i)
					if !(math.Abs(v-ref) <= tol) {
						t.Fatalf("query %d head %d row %d: %v, float64 %v (bound %.3g)", q, h, i, v, ref, tol)
					}
					// The query's representation: Σ 2|q−k|·2⁻¹⁶|q| + (2⁻¹⁶q)².
					qd, hh := h/quadHeads, h%quadHeads
					src := qks[q][qd*nb*qw+(i/anchorBlock)*qw:][:qw]
					at := rv.s.quadRun(qd, i)
					var rep float64
					for e := 2 * hh; e < qw; e += quadWidth {
						for cc := range 2 {
							x := float64(flushTiny(src[e+cc]))
							dq := 0x1p-16 * math.Abs(x)
							rep += 2*math.Abs(x-float64(fromBF16(rv.s.kb[at+e+cc])))*dq + dq*dq + 0x1p-40
						}
					}
					d := float64(diff[q][h*n+i])
					if bound := tol + rep + float64(2*c.g+4)*0x1p-24*d; !(math.Abs(v-d) <= bound) {
						t.Fatalf("query %d head %d row %d: dot form %v, difference form %v (bound %.3g)", q, h, i, v, d, bound)
					}
				}
			}
		}
	})
}

// TestBF16DotAssemblyMatchesTwin holds every dot-form kernel this machine
// runs to the Go twin: within bf16DotTolerance per entry (Intel defines
// VDPBF16PS's two products as added one after the other, each rounded,
// which the twin does; a CPU that adds them otherwise differs by
// rounding), reporting how many entries are not bit-identical.
func TestBF16DotAssemblyMatchesTwin(t *testing.T) {
	var kernels []attendKernel
	for _, k := range attendKernels() {
		if k.scoreBF16 != nil {
			kernels = append(kernels, k)
		}
	}
	if len(kernels) == 0 {
		t.Skip("this CPU has no AVX512-BF16 (or AVX512F): no assembly to hold to the Go twin; TestBF16DotTwinAccuracy checks the twin")
	}
	for _, kern := range kernels {
		var entries, differ int
		dotCases(t, func(t *testing.T, c *contextFit, rv *rowView, qks [][]float32) {
			want := runScores(c, bf16DotKernel, rv, qks)
			got := runScores(c, kern, rv, qks)
			n := c.n
			for q := range qks {
				for j := range want[q] {
					entries++
					if math.Float32bits(got[q][j]) == math.Float32bits(want[q][j]) {
						continue
					}
					differ++
					_, tol, _, _ := dotBounds(c, rv, qks[q], j/n, j%n)
					if d := math.Abs(float64(got[q][j]) - float64(want[q][j])); !(d <= 2*tol) {
						t.Fatalf("%s: query %d head %d row %d = %v, Go twin %v (bound %.3g)", kern.name, q, j/n, j%n, got[q][j], want[q][j], 2*tol)
					}
				}
			}
		})
		t.Logf("%s: %d of %d entries differ from the Go twin's bits (all within bound)", kern.name, differ, entries)
	}
}

// TestChooseKernel checks the kernel switch and the dot form's self-check:
// a named kernel is chosen, an unknown name leaves the default, and a
// dot-form kernel that disagrees with its twin is never chosen.
func TestChooseKernel(t *testing.T) {
	avail := attendKernels()
	want := avail[0].name // the last kernel that is not a bf16 dot form
	for _, k := range avail {
		if k.scoreBF16 == nil {
			want = k.name
		}
	}
	if got := chooseKernel("", avail).name; got != want {
		t.Fatalf("default = %s, want %s (a bf16 dot form is opt-in)", got, want)
	}
	if got := chooseKernel("no-such-kernel", avail).name; got != want {
		t.Fatalf("unknown name chose %s", got)
	}
	if got := chooseKernel("", append(avail, bf16DotKernel)).name; got != want {
		t.Fatalf("a bf16 dot form listed last became the default: %s", got)
	}
	for _, name := range []string{"go", "go-bf16dot"} {
		if got := chooseKernel(name, avail).name; got != name {
			t.Fatalf("%s chose %s", name, got)
		}
	}
	if !bf16DotSelfCheck(bf16DotKernel) {
		t.Fatal("the Go twin fails its own self-check")
	}
	broken := bf16DotKernel
	broken.name = "broken"
	broken.scoreBF16 = func(k, qhi, qlo []uint16, qn, kn, d2 []float32, n, i0 int) {
		scoreBF16Go(k, qhi, qlo, qn, kn, d2, n, i0)
		d2[i0] *= 1.001
	}
	if got := chooseKernel("broken", append(avail, broken)).name; got == "broken" {
		t.Fatal("a dot-form kernel that disagrees with its twin was chosen")
	}
}
