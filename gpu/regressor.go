package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrContextTooLarge is returned when the context must be shortened to fit
// the elements budget and the policy forbids dropping rows
// (allow_subsample=false). It is the caller's error: callers map it to 4xx.
var ErrContextTooLarge = errors.New("context too large for the memory policy")

// ErrNotFitted is returned by Predict before a successful Fit.
var ErrNotFitted = errors.New("predict before fit")

// defaultQueryBatch is the number of query rows per forward pass unless a
// budget lowers it or WithQueryBatch sets it.
const defaultQueryBatch = 1024

// chunkAfterOOM is the row chunk of the GP experts after an out-of-memory
// error, unless the policy sets context_row_chunk.
const chunkAfterOOM = 2048

// Option configures a Regressor.
type Option func(*Regressor) error

// WithPolicy sets the memory policy; it must be valid (see Policy.Validate).
// Thinking models reject it with ErrThinkingPolicy.
func WithPolicy(p Policy) Option {
	return func(r *Regressor) error {
		if err := p.Validate(); err != nil {
			return err
		}
		r.policy, r.policySet = p, true
		return nil
	}
}

// WithDevice sets the device whose memory is the "GPU memory" of the
// policy. Default: a CPU device of DefaultDeviceMemoryBytes.
func WithDevice(d Device) Option {
	return func(r *Regressor) error {
		if d == nil {
			return errors.New("with device: nil device")
		}
		r.dev = d
		return nil
	}
}

// WithHostMemory sets the host RAM, in bytes, that host_budget_frac applies
// to. Default: HostMemoryBytes() (physical RAM or the cgroup limit).
func WithHostMemory(bytes int64) Option {
	return func(r *Regressor) error {
		if bytes < 0 {
			return fmt.Errorf("with host memory: %d bytes is negative", bytes)
		}
		r.hostBytes = bytes
		return nil
	}
}

// WithQueryBatch sets the query rows per forward pass (default 1024); a
// query set larger than one batch gets a KV cache.
func WithQueryBatch(n int) Option {
	return func(r *Regressor) error {
		if n < 1 {
			return fmt.Errorf("with query batch: %d is not a positive row count", n)
		}
		r.queryBatch = n
		return nil
	}
}

// Regressor is a local in-context regressor: Fit learns from the context,
// Predict answers queries against it. Fit must not run concurrently with
// anything else on the same Regressor; Predict is safe for concurrent use
// after Fit (the KV cache is built once and shared).
type Regressor struct {
	cfg        modelConfig
	policy     Policy
	policySet  bool
	dev        Device
	hostBytes  int64
	queryBatch int
	cores      *CorePool

	fit     *contextFit
	dropped int

	mu     sync.Mutex
	cache  *kvCache
	calls  int // Predict calls since Fit
	report MemoryReport
}

// NewRegressor returns a regressor for a built-in model slug.
func NewRegressor(model string, opts ...Option) (*Regressor, error) {
	cfg, ok := lookupConfig(model)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	r := &Regressor{cfg: cfg, policy: DefaultPolicy(), hostBytes: -1, queryBatch: defaultQueryBatch}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	if cfg.info.Thinking && r.policySet {
		return nil, fmt.Errorf("%w (model %s)", ErrThinkingPolicy, model)
	}
	if r.dev == nil {
		r.dev = NewCPUDevice(0)
	}
	if r.cores == nil {
		r.cores = DefaultCorePool()
	}
	if r.hostBytes < 0 {
		r.hostBytes = HostMemoryBytes()
	}
	return r, nil
}

// Model describes the regressor's model.
func (r *Regressor) Model() ModelInfo { return r.cfg.info }

// elementsBudget caps (context + query) rows × features per pass: the
// policy's, or one element per 16 bytes of device memory.
func (r *Regressor) elementsBudget() int64 {
	if r.policy.ElementsBudget != nil {
		return *r.policy.ElementsBudget
	}
	return max(r.dev.Capacity()/16, 1)
}

// resolvedPolicy is the policy as the report states it: elements_budget
// holds the cap in force, derived from device memory when the caller left
// it unset.
func (r *Regressor) resolvedPolicy() Policy {
	p := r.policy
	eb := r.elementsBudget()
	p.ElementsBudget = &eb
	return p
}

// Fit learns from the context X (rows × features; NaN or ±Inf cells are
// missing) and targets y. See prep for how missing cells are handled. Once
// ctx ends it stops (within an optimiser iteration, a head or a block of
// rows) and returns an error wrapping ctx.Err(), leaving the regressor
// unfitted.
func (r *Regressor) Fit(ctx context.Context, X [][]float64, y []float64) error {
	ctx, leave, err := r.unfit(ctx)
	if err != nil {
		return fmt.Errorf("fit: %w", err)
	}
	defer leave()
	if len(X) == 0 {
		return errors.New("fit: empty context: need at least one row")
	}
	feats := int64(max(len(X[0]), 1))
	// The context plus at least one query row must fit one pass; a
	// streamed context stays in host memory and a pass holds one slice.
	if keep := r.elementsBudget()/feats - 1; !r.streams() && int64(len(X)) > keep {
		if !r.policy.AllowSubsample {
			return fmt.Errorf("fit: %w: %d rows × %d features leave no room for a query row in elements_budget %d, and allow_subsample is false",
				ErrContextTooLarge, len(X), feats, r.elementsBudget())
		}
		if keep < 1 {
			return fmt.Errorf("fit: %w: elements_budget %d cannot hold one row of %d features", ErrContextTooLarge, r.elementsBudget(), feats)
		}
		rows := scoreRows(len(X), int(keep))
		xs, ys := make([][]float64, len(rows)), make([]float64, len(rows))
		for a, i := range rows {
			xs[a], ys[a] = X[i], y[i]
		}
		r.dropped = len(X) - len(rows)
		X, y = xs, ys
	}
	// context_row_chunk is not applied here: like the vendor's, it sizes the
	// row chunks of the context_row_chunk rung, reached after an
	// out-of-memory error (see resolve).
	c, err := fitContext(ctx, r.cfg, X, y, fitOptions{})
	if err != nil {
		return fmt.Errorf("fit: %w", err)
	}
	r.fit = c
	return nil
}

// MemoryReport describes how the last Predict held the context.
func (r *Regressor) MemoryReport() MemoryReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.report
}

// Close releases the device memory of the KV cache.
func (r *Regressor) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freeCacheLocked()
	return nil
}

func (r *Regressor) freeCacheLocked() {
	if r.cache != nil {
		release(r.cache.res)
		r.cache = nil
	}
}

// unfit enters the core pool for a fit (leave gives the cores back) and
// forgets the fit, its cache and its calls.
func (r *Regressor) unfit(ctx context.Context) (context.Context, func(), error) {
	ctx, leave, err := r.cores.enter(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.mu.Lock()
	r.freeCacheLocked()
	r.calls = 0
	r.mu.Unlock()
	r.fit, r.dropped = nil, 0
	return ctx, leave, nil
}
