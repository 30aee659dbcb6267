package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// keyLimiters paces each key with its own token bucket. It holds one bucket
// per key that has called since start; keys are few (they are rows in
// PostgreSQL made by an operator), so the map is not pruned.
type keyLimiters struct {
	perSecond rate.Limit
	burst     int

	mu sync.Mutex
	m  map[int64]*rate.Limiter
}

func newKeyLimiters(perMinute float64, burst int) *keyLimiters {
	return &keyLimiters{perSecond: rate.Limit(perMinute / 60), burst: burst, m: make(map[int64]*rate.Limiter)}
}

// allow takes a token for key at now, or reports how long until one is
// available without taking it.
func (l *keyLimiters) allow(key int64, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		lim = rate.NewLimiter(l.perSecond, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Minute
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Errors of the prediction gate; both answer 503 with Retry-After.
var (
	errQueueFull    = errors.New("queue full")
	errQueueTimeout = errors.New("queue wait timed out")
)

// gate bounds the predictions computed at once and the requests waiting for
// one, so a burst queues briefly and then sheds load instead of piling up.
type gate struct {
	slots    chan struct{}
	waiting  atomic.Int64
	maxQueue int64
	timeout  time.Duration
}

func newGate(concurrent, queue int, timeout time.Duration) *gate {
	return &gate{slots: make(chan struct{}, concurrent), maxQueue: int64(queue), timeout: timeout}
}

// acquire waits for a slot and returns its release, or errQueueFull,
// errQueueTimeout or ctx's error.
func (g *gate) acquire(ctx context.Context) (func(), error) {
	release := func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return release, nil
	default:
	}
	if g.waiting.Add(1) > g.maxQueue {
		g.waiting.Add(-1)
		return nil, errQueueFull
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.timeout)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, errQueueTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// inFlight is the number of predictions running now.
func (g *gate) inFlight() int { return len(g.slots) }
