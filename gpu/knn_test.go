package gpu

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// knnMean is the mean of v over the k nearest rows by (distance, row),
// skip left out, summed in row order, to the bit: against a full sort, on
// distances with many ties, every k up to past the rows and every skip.
func TestKnnMeanMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	for trial := range 300 {
		n := 1 + trial%37
		d2, v := make([]float64, n), make([]float64, n)
		for j := range d2 {
			d2[j] = float64(rng.IntN(6)) // ties
			if trial%3 == 0 {
				d2[j] = rng.Float64()
			}
			v[j] = rng.NormFloat64()
		}
		for _, k := range []int{1, 2, 5, n - 1, n, n + 3} {
			for _, skip := range []int{-1, 0, n / 2, n - 1} {
				idx := make([]int, 0, n)
				for j := range n {
					if j != skip {
						idx = append(idx, j)
					}
				}
				sort.Slice(idx, func(a, b int) bool {
					return d2[idx[a]] < d2[idx[b]] || d2[idx[a]] == d2[idx[b]] && idx[a] < idx[b]
				})
				kk := min(k, len(idx))
				var want float64
				if kk > 0 {
					sel := append([]int(nil), idx[:kk]...)
					sort.Ints(sel)
					for _, j := range sel {
						want += v[j]
					}
					want /= float64(kk)
				}
				if got := knnMean(d2, v, k, skip); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("n=%d k=%d skip=%d: %v, sorted %v", n, k, skip, got, want)
				}
			}
		}
	}
}
