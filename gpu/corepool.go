package gpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// CorePool shares a number of cores among every Fit and Predict given it,
// so that the tasks a role runs at once (its --concurrency) never run more
// engine goroutines than there are cores. Each call holds one core for as
// long as it runs (waiting for one when all are taken); its parallel
// loops add as many more as are free at that moment, never waiting for
// them, and give them back when the loop ends. One call alone thus uses
// every core of the pool; two calls share them. Results never depend on
// how many cores a call got (parallelFor). Safe for concurrent use.
type CorePool struct {
	sem chan struct{}
}

// NewCorePool returns a pool of n cores; n < 1 means runtime.GOMAXPROCS(0)
// (the cores the process is allowed: Go derives it from the CPU affinity
// mask and the cgroup's CPU limit).
func NewCorePool(n int) *CorePool {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return &CorePool{sem: make(chan struct{}, n)}
}

// Cores is the pool's size.
func (p *CorePool) Cores() int { return cap(p.sem) }

// InUse is the number of cores held now.
func (p *CorePool) InUse() int { return len(p.sem) }

var defaultCorePool = sync.OnceValue(func() *CorePool { return NewCorePool(0) })

// DefaultCorePool is the process's pool of GOMAXPROCS cores, which every
// Regressor created without WithCorePool shares: the worker's tasks and the
// gateway's requests in one process draw from it together.
func DefaultCorePool() *CorePool { return defaultCorePool() }

// WithCorePool sets the pool of cores Fit and Predict draw from (default
// DefaultCorePool()).
func WithCorePool(p *CorePool) Option {
	return func(r *Regressor) error {
		if p == nil {
			return fmt.Errorf("with core pool: nil pool")
		}
		r.cores = p
		return nil
	}
}

// coreKey marks a context whose call holds a core of the pool it names.
type coreKey struct{}

// enter holds one core of p for a call, waiting until one is free or ctx
// ends. A context that already holds one (a call made from within another,
// such as PredictDetailed's Predict) is returned as it is, so that a call
// never waits for a core its own caller holds.
func (p *CorePool) enter(ctx context.Context) (context.Context, func(), error) {
	if _, ok := ctx.Value(coreKey{}).(*CorePool); ok {
		return ctx, func() {}, nil
	}
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx, nil, ctx.Err()
	}
	return context.WithValue(ctx, coreKey{}, p), func() { <-p.sem }, nil
}

// tryTake holds up to n more cores, as many as are free now, and returns
// how many it got.
func (p *CorePool) tryTake(n int) int {
	got := 0
	for got < n {
		select {
		case p.sem <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

// give returns n cores taken by tryTake.
func (p *CorePool) give(n int) {
	for range n {
		<-p.sem
	}
}

// poolOf is the pool a call's context holds a core of (nil outside Fit and
// Predict, as in the package's own tests: then loops use GOMAXPROCS).
func poolOf(ctx context.Context) *CorePool {
	p, _ := ctx.Value(coreKey{}).(*CorePool)
	return p
}
