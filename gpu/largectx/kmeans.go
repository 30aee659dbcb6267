package largectx

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
)

// Clustering is hand-written rather than taken from a library: it must be
// seeded and bit-reproducible, fit on a bounded subsample (so its cost does
// not grow with the context) and read the engine's row layout with missing
// cells; the Go k-means packages seed from global state or copy the data.

// Streams of the seeded generator, one per use, so that draws for one
// purpose never shift another's.
const (
	streamWindow  = 1   // random's window
	streamSample  = 2   // the rows k-means is fitted on
	streamInit    = 3   // k-means++ seeding
	streamHoldout = 7   // a gate's random holdout
	streamCluster = 100 // + cluster index: a cluster's window
)

// kmeansRows bounds the rows k-means is fitted on: eight clusters in a few
// features are placed as well from 16k rows as from a million, and the fit
// then costs the same at any context size. Every row is still assigned.
const kmeansRows = 16_384

// kmeansIters bounds Lloyd's iterations; they stop earlier once no
// assignment changes.
const kmeansIters = 50

// rng is the seeded generator of one stream.
func rng(seed uint32, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), stream))
}

// sample returns k distinct indices of [0, n) in ascending order, drawn by
// r (all of them when k ≥ n).
func sample(r *rand.Rand, n, k int) []int {
	if k >= n {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	// Floyd's algorithm: k draws, no n-sized permutation.
	chosen := make(map[int]struct{}, k)
	out := make([]int, 0, k)
	for j := n - k; j < n; j++ {
		t := r.IntN(j + 1)
		if _, dup := chosen[t]; dup {
			t = j
		}
		chosen[t] = struct{}{}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// space standardises rows on the context's column means and standard
// deviations, so that every feature counts alike in a distance. A missing
// (non-finite) cell sits at the mean; a constant column counts for nothing.
type space struct {
	mean, inv []float64
}

func newSpace(X [][]float64) space {
	f := len(X[0])
	s := space{mean: make([]float64, f), inv: make([]float64, f)}
	for j := range f {
		var sum, sq float64
		var m int
		for _, row := range X {
			if v := row[j]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				sum += v
				m++
			}
		}
		if m == 0 {
			continue
		}
		mu := sum / float64(m)
		for _, row := range X {
			if v := row[j]; !math.IsNaN(v) && !math.IsInf(v, 0) {
				sq += (v - mu) * (v - mu)
			}
		}
		s.mean[j] = mu
		if sd := math.Sqrt(sq / float64(m)); sd > 0 {
			s.inv[j] = 1 / sd
		}
	}
	return s
}

// point writes row's standardised coordinates into dst.
func (s space) point(dst, row []float64) {
	for j, v := range row {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			dst[j] = 0
			continue
		}
		dst[j] = (v - s.mean[j]) * s.inv[j]
	}
}

// sqDist is the squared distance of two points.
func sqDist(a, b []float64) float64 {
	var d float64
	for j, v := range a {
		t := v - b[j]
		d += t * t
	}
	return d
}

// nearest is the index of the centroid nearest p (ties to the lower index).
func nearest(cents [][]float64, p []float64) int {
	best, bd := 0, math.Inf(1)
	for c, cent := range cents {
		if d := sqDist(p, cent); d < bd {
			best, bd = c, d
		}
	}
	return best
}

// kmeans places up to k centroids among pts by k-means++ seeding and
// Lloyd's iterations. It returns fewer when pts hold fewer distinct points.
func kmeans(ctx context.Context, pts [][]float64, k int, r *rand.Rand) ([][]float64, error) {
	f := len(pts[0])
	cents := [][]float64{slices.Clone(pts[r.IntN(len(pts))])}
	d2 := make([]float64, len(pts))
	for i, p := range pts {
		d2[i] = sqDist(p, cents[0])
	}
	for len(cents) < k {
		var total float64
		for _, d := range d2 {
			total += d
		}
		if total == 0 {
			break // every point sits on a centroid
		}
		u := r.Float64() * total
		pick := -1
		for i, d := range d2 {
			if d == 0 {
				continue
			}
			pick = i // the last point off every centroid, should rounding leave u ≥ 0
			if u -= d; u < 0 {
				break
			}
		}
		c := slices.Clone(pts[pick])
		cents = append(cents, c)
		for i, p := range pts {
			d2[i] = min(d2[i], sqDist(p, c))
		}
	}
	assign := make([]int, len(pts))
	for i := range assign {
		assign[i] = -1
	}
	sums := make([][]float64, len(cents))
	for c := range sums {
		sums[c] = make([]float64, f)
	}
	counts := make([]int, len(cents))
	for range kmeansIters {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		changed := false
		for i, p := range pts {
			if c := nearest(cents, p); c != assign[i] {
				assign[i], changed = c, true
			}
		}
		if !changed {
			break
		}
		for c := range sums {
			clear(sums[c])
			counts[c] = 0
		}
		for i, p := range pts {
			c := assign[i]
			counts[c]++
			for j, v := range p {
				sums[c][j] += v
			}
		}
		for c, cent := range cents {
			if counts[c] == 0 {
				continue // an emptied cluster keeps its place
			}
			for j := range cent {
				cent[j] = sums[c][j] / float64(counts[c])
			}
		}
	}
	return cents, nil
}
