package gpu

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// activity counts the loop bodies running at once and keeps the peak.
type activity struct{ now, peak atomic.Int64 }

func (a *activity) body(lo, hi int) {
	n := a.now.Add(1)
	for {
		p := a.peak.Load()
		if n <= p || a.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	a.now.Add(-1)
}

// One call alone uses every core of its pool, whatever GOMAXPROCS is.
func TestCorePoolOneCallUsesEveryCore(t *testing.T) {
	pool := NewCorePool(3)
	ctx, leave, err := pool.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var a activity
	if err := parallelFor(ctx, 24, 1, a.body); err != nil {
		t.Fatal(err)
	}
	leave()
	if got := a.peak.Load(); got != 3 {
		t.Errorf("peak loop bodies at once = %d, want the pool's 3", got)
	}
	if pool.InUse() != 0 {
		t.Errorf("%d cores still held after the call", pool.InUse())
	}
}

// Calls running at once (a role's --concurrency tasks) share the pool: the
// loop bodies of all of them together never exceed its cores, however many
// calls there are, and each call finishes.
func TestCorePoolCallsNeverOversubscribe(t *testing.T) {
	for _, calls := range []int{2, 5} {
		pool := NewCorePool(3)
		var a activity
		var wg sync.WaitGroup
		errs := make([]error, calls)
		for i := range calls {
			wg.Go(func() {
				ctx, leave, err := pool.enter(context.Background())
				if err != nil {
					errs[i] = err
					return
				}
				defer leave()
				for range 4 {
					if err := parallelFor(ctx, 12, 1, a.body); err != nil {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("%d calls: call %d: %v", calls, i, err)
			}
		}
		if got := a.peak.Load(); got > 3 || got < 2 {
			t.Errorf("%d calls: peak loop bodies at once = %d, want 2..3 (pool of 3)", calls, got)
		}
		if pool.InUse() != 0 {
			t.Errorf("%d calls: %d cores still held", calls, pool.InUse())
		}
	}
}

// A loop inside a loop body, and a call made from within a call, never wait
// for a core their caller holds: a pool of one core finishes.
func TestCorePoolNestedCallsDoNotDeadlock(t *testing.T) {
	pool := NewCorePool(1)
	done := make(chan error, 1)
	go func() {
		ctx, leave, err := pool.enter(context.Background())
		if err != nil {
			done <- err
			return
		}
		defer leave()
		ctx2, leave2, err := pool.enter(ctx) // PredictDetailed's Predict
		if err != nil {
			done <- err
			return
		}
		defer leave2()
		var sum atomic.Int64
		done <- parallelFor(ctx2, 8, 1, func(lo, hi int) {
			_ = parallelFor(ctx2, 8, 1, func(lo, hi int) { sum.Add(1) })
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nested calls on a pool of one core did not finish")
	}
}

// A call waiting for a core stops when its context ends.
func TestCorePoolWaitStopsWithContext(t *testing.T) {
	pool := NewCorePool(1)
	_, leave, err := pool.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := pool.enter(ctx); err == nil {
		t.Fatal("enter on a full pool returned no error after its context ended")
	}
}

// Fit and Predict give the same bits on a pool of one core as on a pool of
// four, and two regressors sharing one pool at once match them too.
func TestCorePoolResultsIndependentOfCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	X := make([][]float64, 300)
	y := make([]float64, len(X))
	for i := range X {
		X[i] = []float64{rng.Float64(), rng.Float64(), rng.Float64()}
		y[i] = X[i][0]*X[i][1] + 0.2*X[i][2]
	}
	Xq := X[:50]
	run := func(pool *CorePool) []float64 {
		r, err := NewRegressor("regressd/model-2l", WithCorePool(pool))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Fit(context.Background(), X, y); err != nil {
			t.Fatal(err)
		}
		p, err := r.Predict(context.Background(), Xq)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	one, four := run(NewCorePool(1)), run(NewCorePool(4))
	shared := NewCorePool(2)
	var a, b []float64
	var wg sync.WaitGroup
	wg.Go(func() { a = run(shared) })
	wg.Go(func() { b = run(shared) })
	wg.Wait()
	for i := range one {
		if one[i] != four[i] || one[i] != a[i] || one[i] != b[i] {
			t.Fatalf("query %d: %v (1 core) %v (4 cores) %v, %v (shared pool)", i, one[i], four[i], a[i], b[i])
		}
	}
	if _, err := NewRegressor("regressd/model-2l", WithCorePool(nil)); err == nil {
		t.Error("WithCorePool(nil) accepted")
	}
}
