package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
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
	// Quantiles are the levels of the quantiles to return beside the
	// point (PredictDetailed); nil: none.
	Quantiles []float64
	// LargeContext routes a large context (gpu/largectx); nil: the whole
	// context in one engine call.
	LargeContext *schemas.LargeContext
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
	// window is the most context rows one call of a large-context policy
	// takes; 0: largectx.DefaultWindow. Tests make it small.
	window int

	mu    sync.Mutex
	cache map[string]*fitted
	order []string
	size  int
}

type fitted struct {
	once    sync.Once
	r       *gpu.Regressor
	m       *largectx.Model // instead of r, for a large-context request
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
	ctx, cancel := withTimeout(ctx, req.Timeout)
	defer cancel()
	f, err := l.fitted(ctx, req)
	if err != nil {
		return nil, err
	}
	defer l.release(f)
	var out []float64
	done := l.observe(f)
	if f.m != nil {
		out, _, err = f.m.Predict(ctx, req.Xq)
	} else {
		out, err = f.r.Predict(ctx, req.Xq)
	}
	done(err)
	if stopped(err) {
		return nil, fmt.Errorf("predict: %w", err)
	}
	if err != nil {
		return nil, Final(fmt.Errorf("predict: %w", err))
	}
	return out, nil
}

// observe times one prediction with f and counts it in flight; the
// returned func ends both and records the KV-cache rung of a success.
func (l *Local) observe(f *fitted) func(error) {
	inflight, timed := l.Metrics.EngineCall(), l.Metrics.Time(metrics.StageEnginePredict)
	return func(err error) {
		timed()
		inflight()
		if err == nil && f.r != nil {
			l.Metrics.ObserveRung(f.r.MemoryReport().Rung)
		}
	}
}

// withTimeout bounds ctx by a task's request_timeout: past it the engine's
// work stops, as a hosted gateway's call would, and the batch is tried
// again like any transient failure.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return ctx, func() {}
}

// fitted returns the request's fitted context, fitting it on the first
// batch: one engine regressor, or a large-context model when the request
// asks for one. The caller releases it.
func (l *Local) fitted(ctx context.Context, req Request) (*fitted, error) {
	// A vendor's name for a built-in model (synthefy/nori-30m) runs that
	// model; the task keeps the name it was given.
	if slug, ok := gpu.ResolveModel(req.Model); ok {
		req.Model = slug
	}
	key := req.Model + "|" + req.ContextID + largeContextKey(req.LargeContext)
	f := l.acquire(key)
	f.once.Do(func() {
		if req.LargeContext != nil {
			inflight, timed := l.Metrics.EngineCall(), l.Metrics.Time(metrics.StageEngineFit)
			f.m, f.err = fitLarge(ctx, req, l.opts, l.window)
			timed()
			inflight()
			return
		}
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
		err := f.err
		if stopped(err) {
			l.forget(key, f)
		}
		l.release(f)
		return nil, err
	}
	return f, nil
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
		if old.users == 0 {
			old.close()
		}
	}
	return f
}

func (l *Local) release(f *fitted) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.users--
	if f.evicted && f.users == 0 {
		f.close()
	}
}

// close frees the fitted engine; called under Local.mu once no batch uses it.
func (f *fitted) close() {
	if f.r != nil {
		f.r.Close()
	}
	if f.m != nil {
		f.m.Close()
	}
}
