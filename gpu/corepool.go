package gpu

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// CorePool shares a number of cores among every Fit and Predict given it,
// so that the tasks a role runs at once (its --concurrency) never run more
// engine goroutines than there are cores. Each call holds one core for as
// long as it runs (waiting for one when all are taken); its parallel
// loops add as many more as are free at that moment, never waiting for
// them, take up those given back while they have pieces left, and give
// them back when the loop ends. One call alone thus uses
// every core of the pool; two calls share them. Results never depend on
// how many cores a call got (parallelFor). Safe for concurrent use.
type CorePool struct {
	sem chan struct{}

	mu sync.Mutex
	// wants are the parallel loops that have pieces no core has yet
	// claimed, oldest first. A core given back goes to the oldest that
	// still has one, not back to the pool: the oldest is the outermost of
	// nested loops, whose pieces are the coarsest, and a new call waiting
	// in enter comes first (entering).
	wants    []*coreWant
	entering atomic.Int64
}

// coreWant is a parallel loop's standing request for cores: take runs a
// further worker on a core handed to it, or says false when the loop has
// nothing left for one.
type coreWant struct{ take func() bool }

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
	default:
		p.entering.Add(1)
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			p.entering.Add(-1)
			return ctx, nil, ctx.Err()
		}
		p.entering.Add(-1)
	}
	return context.WithValue(ctx, coreKey{}, p), func() { p.give(1) }, nil
}

// retake holds a core again for a caller that gave its own back while it
// waited, waiting as long as it takes: the cores it waits for are held by
// loops that end, and it comes before the loops that want more.
func (p *CorePool) retake() {
	select {
	case p.sem <- struct{}{}:
		return
	default:
	}
	p.entering.Add(1)
	p.sem <- struct{}{}
	p.entering.Add(-1)
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

// give returns n cores taken by tryTake or enter, each to the oldest loop
// that wants one (see wants), or else, and whenever a call waits to enter,
// to the pool.
func (p *CorePool) give(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		handed := false
		for len(p.wants) > 0 && !handed && p.entering.Load() == 0 {
			handed = p.wants[0].take()
			if !handed {
				p.wants = p.wants[1:] // nothing left for a core
			}
		}
		if !handed {
			<-p.sem
		}
	}
}

// want registers w to be handed cores as they are given back.
func (p *CorePool) want(w *coreWant) {
	p.mu.Lock()
	p.wants = append(p.wants, w)
	p.mu.Unlock()
}

// unwant withdraws w; once it returns, w.take is no longer called.
func (p *CorePool) unwant(w *coreWant) {
	p.mu.Lock()
	if i := slices.Index(p.wants, w); i >= 0 {
		p.wants = slices.Delete(p.wants, i, i+1)
	}
	p.mu.Unlock()
}

// poolOf is the pool a call's context holds a core of (nil outside Fit and
// Predict, as in the package's own tests: then loops use GOMAXPROCS).
func poolOf(ctx context.Context) *CorePool {
	p, _ := ctx.Value(coreKey{}).(*CorePool)
	return p
}
