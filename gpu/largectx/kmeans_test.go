package largectx

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSample(t *testing.T) {
	a := sample(rng(5, 1), 1000, 100)
	b := sample(rng(5, 1), 1000, 100)
	c := sample(rng(6, 1), 1000, 100)
	if !slices.Equal(a, b) {
		t.Error("the same seed drew different rows")
	}
	if slices.Equal(a, c) {
		t.Error("another seed drew the same rows")
	}
	if len(a) != 100 || !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != 100 || a[0] < 0 || a[99] >= 1000 {
		t.Errorf("not 100 distinct ascending rows of [0, 1000): %v", a)
	}
	if all := sample(rng(5, 1), 10, 20); !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("k ≥ n gave %v, want every row", all)
	}
}

func TestSpaceStandardises(t *testing.T) {
	X := [][]float64{{1, 5, math.NaN()}, {3, 5, 2}, {5, 5, math.Inf(1)}}
	s := newSpace(X)
	p := make([]float64, 3)
	s.point(p, X[0])
	sd := math.Sqrt(8.0 / 3)
	if math.Abs(p[0]-(-2/sd)) > 1e-12 || p[1] != 0 || p[2] != 0 {
		t.Errorf("point %v: want the first column standardised, a constant column and a missing cell at 0", p)
	}
	s.point(p, []float64{3, 100, 2})
	if p[0] != 0 || p[1] != 0 || p[2] != 0 {
		t.Errorf("point %v, want the means at 0 and the constant column ignored", p)
	}
}

func TestKMeansFindsBlobs(t *testing.T) {
	centres := [][]float64{{-5, -5}, {-5, 5}, {5, -5}, {5, 5}}
	r := rand.New(rand.NewPCG(1, 1))
	var pts [][]float64
	for i := range 2000 {
		c := centres[i%4]
		pts = append(pts, []float64{c[0] + 0.3*r.NormFloat64(), c[1] + 0.3*r.NormFloat64()})
	}
	got, err := kmeans(context.Background(), pts, 4, rng(3, streamInit))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := kmeans(context.Background(), pts, 4, rng(3, streamInit))
	if len(got) != 4 {
		t.Fatalf("%d centroids, want 4", len(got))
	}
	for c := range got {
		if !slices.Equal(got[c], again[c]) {
			t.Error("the same seed placed different centroids")
		}
	}
	for _, want := range centres {
		if d := sqDist(got[nearest(got, want)], want); d > 0.05 {
			t.Errorf("no centroid near blob %v (nearest at squared distance %.3f)", want, d)
		}
	}
	few, _ := kmeans(context.Background(), [][]float64{{1, 1}, {1, 1}, {2, 2}}, 8, rng(3, streamInit))
	if len(few) != 2 {
		t.Errorf("%d centroids for 2 distinct points, want 2", len(few))
	}
}

func TestSplit(t *testing.T) {
	keep, held := split(10_000, 2048, HoldoutTail, 0)
	if len(held) != holdoutRows || held[0] != 10_000-holdoutRows || held[len(held)-1] != 9999 || len(keep) != 10_000-holdoutRows || keep[len(keep)-1] != 10_000-holdoutRows-1 {
		t.Errorf("tail: held %d rows from %d, kept %d", len(held), held[0], len(keep))
	}
	keep, held = split(10_000, 2048, HoldoutRandom, 4)
	keep2, held2 := split(10_000, 2048, HoldoutRandom, 4)
	if !slices.Equal(held, held2) || !slices.Equal(keep, keep2) {
		t.Error("random holdout is not reproducible")
	}
	if len(held) != holdoutRows || len(keep)+len(held) != 10_000 || held[len(held)-1] < 10_000-holdoutRows {
		t.Errorf("random: held %d, kept %d, last held %d", len(held), len(keep), held[len(held)-1])
	}
	joined := slices.Sorted(slices.Values(append(slices.Clone(keep), held...)))
	for i, v := range joined {
		if v != i {
			t.Fatal("keep and held do not partition the rows")
		}
	}
	// Just above the window: the slice leaves the window whole, with at least 2 rows.
	if _, held := split(2050, 2048, HoldoutRandom, 0); len(held) != 2 {
		t.Errorf("held %d rows, want 2", len(held))
	}
	if keep, held := split(2, 1, HoldoutTail, 0); len(keep) != 1 || len(held) != 1 {
		t.Errorf("two rows split %d/%d, want 1/1", len(keep), len(held))
	}
}
