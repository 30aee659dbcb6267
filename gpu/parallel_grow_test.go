package gpu

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A loop that starts while every core of its pool is taken runs on its
// caller's core alone, and takes up a core given back while it runs: two
// of its pieces then meet at once. Its results stay those of one core.
func TestParallelForTakesUpFreedCore(t *testing.T) {
	pool := NewCorePool(2)
	ctx, leave, err := pool.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	if pool.tryTake(1) != 1 {
		t.Fatal("the pool's second core was not free")
	}
	var waiting atomic.Int64
	met := make([]bool, 4)
	out := make([]int, 4)
	if err := parallelFor(ctx, 4, 1, func(lo, hi int) {
		out[lo] = lo * lo
		switch lo {
		case 0:
			pool.give(1) // the sibling ends while the loop runs
		case 1, 2:
			waiting.Add(1)
			deadline := time.Now().Add(5 * time.Second)
			for waiting.Load() < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			met[lo] = waiting.Load() >= 2
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !met[1] || !met[2] {
		t.Error("pieces 1 and 2 never ran at once: the freed core was not taken up")
	}
	for i, v := range out {
		if v != i*i {
			t.Errorf("piece %d wrote %d", i, v)
		}
	}
	if got := pool.InUse(); got != 1 {
		t.Errorf("after the loop %d cores held, want 1 (the caller's)", got)
	}
}
