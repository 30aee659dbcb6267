package gpu

import (
	"context"
	"hash/fnv"
	"math"
	"runtime"
	"sync"
	"testing"
)

// TestFitBitsIndependentOfCores: the default model's Fit (its concurrent
// hyperparameter searches, forests, held-out blocks and readout scoring)
// gives the same predictions bit for bit on a pool of one core, of two and
// of four, with GOMAXPROCS 1 and unrestricted, and two fits sharing a pool
// of two at once match them too. Sizes cover both stackings: k-fold (400
// rows) and leave-one-out with held-out blocks (1,000 rows).
func TestFitBitsIndependentOfCores(t *testing.T) {
	if testing.Short() {
		t.Skip("fits the default model ten times")
	}
	for _, n := range []int{400, 1000} {
		X, y := synth(n, 8, 21)
		Xq, _ := synth(200, 8, 22)
		run := func(pool *CorePool) []float64 {
			r, err := NewRegressor(DefaultModel, WithCorePool(pool))
			if err != nil {
				t.Error(err)
				return nil
			}
			defer r.Close()
			if err := r.Fit(context.Background(), X, y); err != nil {
				t.Error(err)
				return nil
			}
			p, err := r.Predict(context.Background(), Xq)
			if err != nil {
				t.Error(err)
			}
			return p
		}
		prev := runtime.GOMAXPROCS(1)
		serial := run(NewCorePool(1))
		runtime.GOMAXPROCS(prev)
		sameBits(t, "1 core vs 2", serial, run(NewCorePool(2)))
		sameBits(t, "1 core vs 4", serial, run(NewCorePool(4)))
		shared := NewCorePool(2)
		var a, b []float64
		var wg sync.WaitGroup
		wg.Go(func() { a = run(shared) })
		wg.Go(func() { b = run(shared) })
		wg.Wait()
		sameBits(t, "1 core vs shared pool (first)", serial, a)
		sameBits(t, "1 core vs shared pool (second)", serial, b)
		// The digest lets another build (main's serial code) be compared
		// by hand: go test -run TestFitBitsIndependentOfCores -v.
		h := fnv.New64a()
		for _, v := range serial {
			bits := math.Float64bits(v)
			h.Write([]byte{byte(bits), byte(bits >> 8), byte(bits >> 16), byte(bits >> 24), byte(bits >> 32), byte(bits >> 40), byte(bits >> 48), byte(bits >> 56)})
		}
		t.Logf("rows=%d: predictions digest %016x", n, h.Sum64())
	}
}
