package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/metrics"
)

// Request is one batch to predict.
type Request struct {
	Model string
	// ContextID identifies the context (its digest), so a predictor can reuse
	// work done for an earlier batch of the same task.
	ContextID string
	X         [][]float64
	Y         []float64
	Xq        [][]float64
	// Key is the model-service key, opened from its seal; "" when none.
	Key string
	// Timeout bounds the prediction (one gateway call). A predictor makes
	// one attempt: the worker attempts a batch again, max_retries times
	// in all.
	Timeout time.Duration
}

// Predictor predicts query rows from a context.
type Predictor interface {
	// Predict returns one value per query row; NaN means no prediction for
	// that row. It must be safe for concurrent use. Errors that retrying
	// cannot fix are wrapped with Final.
	Predict(ctx context.Context, req Request) ([]float64, error)
}

// finalError marks an error that retrying will not fix (bad input, a model
// that does not exist, a refused key): the batch fails for good.
type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// Final wraps err as not worth retrying.
func Final(err error) error { return finalError{err} }

// IsFinal reports whether err was wrapped by Final.
func IsFinal(err error) bool {
	var f finalError
	return errors.As(err, &f)
}

// Local predicts with the built-in engine in this process. It keeps the
// fitted engines of the most recent contexts, so the context of a task is
// processed once however many batches it has; an engine evicted from the
// cache is closed (its KV cache freed) once no batch is using it.
type Local struct {
	opts []gpu.Option
	// Metrics times fits and predictions, counts them in flight and
	// records the KV-cache rung; nil records nothing. Set before use.
	Metrics *metrics.Metrics

	mu    sync.Mutex
	cache map[string]*fitted
	order []string
	size  int
}

type fitted struct {
	once    sync.Once
	r       *gpu.Regressor
	err     error
	users   int  // batches predicting with r; guarded by Local.mu
	evicted bool // guarded by Local.mu
}

var _ Predictor = (*Local)(nil)

// NewLocal returns an engine predictor keeping up to size fitted contexts.
func NewLocal(size int, opts ...gpu.Option) *Local {
	if size <= 0 {
		size = 16
	}
	return &Local{opts: opts, cache: map[string]*fitted{}, size: size}
}

// Predict fits the context once per (model, context) and predicts the batch.
// Both stop when ctx ends; that error is not final, and a fit it stopped is
// forgotten so that the next batch fits again.
func (l *Local) Predict(ctx context.Context, req Request) ([]float64, error) {
	if req.Timeout > 0 {
		// The task's request_timeout bounds the engine as it bounds a
		// hosted gateway's call: past it the work stops, and the batch is
		// tried again like any transient failure.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	key := req.Model + "|" + req.ContextID
	f := l.acquire(key)
	defer l.release(f)
	f.once.Do(func() {
		r, err := gpu.NewRegressor(req.Model, l.opts...)
		if err != nil {
			f.err = Final(err)
			return
		}
		inflight, timed := l.Metrics.EngineCall(), l.Metrics.Time(metrics.StageEngineFit)
		err = r.Fit(ctx, req.X, req.Y)
		timed()
		inflight()
		if err != nil {
			r.Close()
			if stopped(err) {
				f.err = fmt.Errorf("fit context: %w", err)
				return
			}
			f.err = Final(fmt.Errorf("fit context: %w", err))
			return
		}
		f.r = r
	})
	if f.err != nil {
		if stopped(f.err) {
			l.forget(key, f)
		}
		return nil, f.err
	}
	inflight, timed := l.Metrics.EngineCall(), l.Metrics.Time(metrics.StageEnginePredict)
	out, err := f.r.Predict(ctx, req.Xq)
	timed()
	inflight()
	if err == nil {
		l.Metrics.ObserveRung(f.r.MemoryReport().Rung)
	}
	if stopped(err) {
		return nil, fmt.Errorf("predict: %w", err)
	}
	if err != nil {
		return nil, Final(fmt.Errorf("predict: %w", err))
	}
	return out, nil
}

// stopped reports whether err is a context's end rather than the engine's
// verdict on the data.
func stopped(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// forget drops key's entry if it is still f, so the next batch starts a
// fresh fit.
func (l *Local) forget(key string, f *fitted) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cache[key] != f {
		return
	}
	delete(l.cache, key)
	for i, k := range l.order {
		if k == key {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
}

func (l *Local) acquire(key string) *fitted {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.cache[key]; ok {
		f.users++
		return f
	}
	f := &fitted{users: 1}
	l.cache[key] = f
	l.order = append(l.order, key)
	if len(l.order) > l.size {
		old := l.cache[l.order[0]]
		delete(l.cache, l.order[0])
		l.order = l.order[1:]
		old.evicted = true
		if old.users == 0 && old.r != nil {
			old.r.Close()
		}
	}
	return f
}

func (l *Local) release(f *fitted) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.users--
	if f.evicted && f.users == 0 && f.r != nil {
		f.r.Close()
	}
}
