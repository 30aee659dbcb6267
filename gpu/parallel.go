package gpu

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor runs fn over [0, n) split into fixed pieces of grain items.
// The split depends only on n and grain, never on GOMAXPROCS, and every
// piece writes only its own outputs, so results are bit-identical however
// many goroutines run them. Within Fit and Predict the goroutines are the
// caller's core plus the cores of its CorePool free at the start, and any
// freed later while a piece is left unclaimed (a concurrent loop, or a
// sibling task of parallelDo, ended): nested loops thus take up the cores
// their siblings give back. Once ctx ends no further piece starts, and
// parallelFor returns an error wrapping ctx.Err(): the outputs of the
// pieces not run are left as they were, so a caller that gets an error
// must not use them.
func parallelFor(ctx context.Context, n, grain int, fn func(lo, hi int)) error {
	if n <= 0 {
		return ctx.Err()
	}
	if grain < 1 {
		grain = 1
	}
	pieces := (n + grain - 1) / grain
	pool := poolOf(ctx)
	if pieces == 1 || pool == nil && runtime.GOMAXPROCS(0) == 1 || pool != nil && pool.Cores() == 1 {
		for lo := 0; lo < n; lo += grain {
			if err := ctx.Err(); err != nil {
				return err
			}
			fn(lo, min(lo+grain, n))
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var want *coreWant
	var live atomic.Int64 // workers running on cores handed to the loop
	// work claims pieces until none is left; held says it runs on a core
	// handed to the loop, which it gives back when done.
	var work func(held bool)
	work = func(held bool) {
		if held {
			defer wg.Done()
			defer live.Add(-1)
			defer pool.give(1)
		}
		for {
			p := int(next.Add(1)) - 1
			if p >= pieces || ctx.Err() != nil {
				return
			}
			lo := p * grain
			fn(lo, min(lo+grain, n))
		}
	}
	if pool == nil {
		// Outside Fit and Predict (the package's own tests): GOMAXPROCS
		// goroutines, the caller's among them.
		for range min(runtime.GOMAXPROCS(0), pieces) - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work(false)
			}()
		}
	} else {
		extra := pool.tryTake(min(pool.Cores(), pieces) - 1)
		for range extra {
			wg.Add(1)
			live.Add(1)
			go work(true)
		}
		if 1+extra < pieces {
			// Cores given back while pieces are left join the loop.
			want = &coreWant{take: func() bool {
				if int(next.Load()) >= pieces {
					return false
				}
				wg.Add(1)
				live.Add(1)
				go work(true)
				return true
			}}
			pool.want(want)
		}
	}
	work(false)
	if want != nil {
		// Every piece is claimed: no worker starts once the caller waits.
		pool.unwant(want)
	}
	if pool != nil && live.Load() > 0 {
		// The caller's core is not idle while the last pieces run: an
		// enclosing loop with pieces left (or another call) takes it,
		// and the caller takes a core again before it goes on.
		pool.give(1)
		wg.Wait()
		pool.retake()
		return ctx.Err()
	}
	wg.Wait()
	return ctx.Err()
}

// dot is the inner product of two equal-length slices, summed in a fixed
// order (four running sums) so that it is reproducible.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// parallelDo runs each task once, on as many cores as parallelFor gives
// (one piece per task). Each task must write only its own outputs, and the
// caller combines them in a fixed order afterwards, so that the result is
// the same however many cores ran them. Once ctx ends no further task
// starts; the error then wraps ctx.Err().
func parallelDo(ctx context.Context, tasks ...func()) error {
	return parallelFor(ctx, len(tasks), 1, func(lo, hi int) {
		for _, t := range tasks[lo:hi] {
			t()
		}
	})
}
