package gpu

import (
	"context"
	"errors"
	"fmt"
)

// kvCache is a built KV cache: every layer's store, where it lives, and the
// GP expert size its values were solved with.
type kvCache struct {
	rung   string
	dtype  string
	tier   string // "device" or "host"
	layers []*layerStore
	bytes  int64
	res    Reservation // device memory of a resident cache (nil otherwise)
	chunk  int
	slice  int       // context rows per staged slice (stream rungs)
	tried  []Attempt // the ladder's attempts, the last one this cache's
}

// estBytes is the cache size of the fitted context at a precision.
func (r *Regressor) estBytes(dtype string) int64 {
	c := r.fit
	return int64(len(c.layers)) * int64(c.n) * bytesPerRowLayer(c.g, dtype)
}

// dtypes are the cache precisions to try, in order (the vendor's ladder).
func (r *Regressor) dtypes() []string {
	switch {
	case r.policy.CacheDType == CacheDTypeInt8:
		return []string{CacheDTypeInt8}
	case r.policy.AllowQuantization:
		return []string{CacheDTypeBF16, CacheDTypeInt8}
	default:
		return []string{CacheDTypeBF16}
	}
}

// build computes every layer into a cache at dtype, in device memory
// (tier "device", reserved up front) or in host memory (tier "host", each
// layer streamed into device memory when used, so one layer must fit).
func (r *Regressor) build(ctx context.Context, dtype, tier string, chunk int) (*kvCache, error) {
	c := r.fit
	kc := &kvCache{dtype: dtype, tier: tier, chunk: chunk, bytes: r.estBytes(dtype)}
	if tier == "device" {
		res, err := r.dev.Reserve(kc.bytes, "resident "+dtype+" cache")
		if err != nil {
			return nil, err
		}
		kc.res = res
	} else {
		// Check that streaming a layer back will fit.
		res, err := r.dev.Reserve(kc.bytes/int64(len(c.layers)), "one streamed "+dtype+" layer")
		if err != nil {
			return nil, err
		}
		res.Release()
	}
	for l := range c.layers {
		s, err := c.buildLayer(ctx, l, r.dev, chunk, dtype)
		if err != nil {
			release(kc.res)
			return nil, err
		}
		kc.layers = append(kc.layers, s)
	}
	return kc, nil
}

// resolve runs the ladder for a query set that spans several batches:
// resident bf16, resident int8, offload bf16, offload int8 (within the
// policy's budgets and the precisions it allows); after a real
// out-of-memory error, the same with the GP solve in row chunks; else no
// cache (plain_loop).
func (r *Regressor) resolve(ctx context.Context) (*kvCache, error) {
	gpuBudget := r.policy.GPUBudgetBytes(r.dev.Capacity())
	hostBudget := r.policy.HostBudgetBytes(r.hostBytes)
	type step struct{ dtype, tier, rung string }
	var steps []step
	for _, dt := range r.dtypes() {
		if r.estBytes(dt) <= gpuBudget {
			steps = append(steps, step{dt, "device", "resident_" + dt})
		}
	}
	if r.policy.OffloadToHost {
		for _, dt := range r.dtypes() {
			if r.estBytes(dt) <= hostBudget {
				steps = append(steps, step{dt, "host", "offload_" + dt})
			}
		}
	}
	var tried []Attempt
	reason := ReasonResolved
	// attempt records one try; a success is the cache to keep.
	attempt := func(s step, rung string, chunk, rowChunk int) (*kvCache, error) {
		a := Attempt{Rung: rung, CacheDType: s.dtype, Tier: s.tier, ContextRowChunk: rowChunk, Reason: reason}
		kc, err := r.build(ctx, s.dtype, s.tier, chunk)
		if err != nil {
			a.Outcome, a.Err = OutcomeOOM, err.Error()
			tried = append(tried, a)
			reason = ReasonFallbackAfterOOM
			return nil, err
		}
		a.Outcome = OutcomeSuccess
		kc.rung, kc.tried = rung, append(tried, a)
		return kc, nil
	}
	var oom error
	for _, s := range steps {
		kc, err := attempt(s, s.rung, r.fit.solveChunk, 0)
		if err == nil {
			return kc, nil
		}
		if !errors.Is(err, ErrOutOfMemory) {
			return nil, err
		}
		oom = err
	}
	chunk := r.fit.solveChunk
	if oom != nil {
		reason = ReasonOOMRetry
		for _, ch := range r.chunksAfterOOM() {
			chunk = ch
			for _, s := range steps {
				kc, err := attempt(s, RungContextRowChunk, ch, ch)
				if err == nil {
					kc.chunk = ch
					return kc, nil
				}
				if !errors.Is(err, ErrOutOfMemory) {
					return nil, err
				}
			}
		}
	}
	tried = append(tried, Attempt{Rung: RungPlainLoop, Outcome: OutcomeSuccess, Reason: reason})
	return &kvCache{rung: RungPlainLoop, chunk: chunk, tried: tried}, nil
}

// chunksAfterOOM are the GP expert sizes the context_row_chunk rung tries,
// in order, after the cache's build ran out of device memory: the policy's
// context_row_chunk halved down to the smallest of solveChunksAfterOOM, or
// without one chunkAfterOOM halved likewise, less the sizes not below the
// model's own (which just failed). Half the rows is a quarter of the solve
// workspace, so a build that failed at 2,048 rows may fit at 512.
// plain_loop, the rung after, computes its layers with the last of them.
func (r *Regressor) chunksAfterOOM() []int {
	first := chunkAfterOOM
	if r.policy.ContextRowChunk != nil {
		first = *r.policy.ContextRowChunk
	}
	floor := solveChunksAfterOOM[len(solveChunksAfterOOM)-1]
	var out []int
	for ch := first; ; ch /= 2 {
		if r.policy.ContextRowChunk != nil || ch < r.fit.solveChunk {
			out = append(out, ch)
		}
		if ch/2 < floor {
			break
		}
	}
	if len(out) == 0 {
		out = []int{first}
	}
	return out
}

// cacheReader reads layers from a built cache.
func (r *Regressor) cacheReader(kc *kvCache) layerReader {
	return func(_ context.Context, l int) (*layerStore, func(), error) {
		s := kc.layers[l]
		if kc.tier == "device" {
			return s, func() {}, nil
		}
		res, err := r.dev.Reserve(s.bytes(), "streamed layer")
		if err != nil {
			return nil, nil, err
		}
		return s.clone(), res.Release, nil
	}
}

// computeReader computes each layer afresh for every pass, in bf16 like the
// cache, in device memory: the uncached path (no_cache, plain_loop).
func (r *Regressor) computeReader(chunk int) layerReader {
	c := r.fit
	return func(ctx context.Context, l int) (*layerStore, func(), error) {
		res, err := r.dev.Reserve(int64(c.n)*bytesPerRowLayer(c.g, CacheDTypeBF16), "layer for one pass")
		if err != nil {
			return nil, nil, err
		}
		s, err := c.buildLayer(ctx, l, r.dev, chunk, CacheDTypeBF16)
		if err != nil {
			res.Release()
			return nil, nil, err
		}
		return s, res.Release, nil
	}
}

// Predict returns one prediction per query row. NaN or ±Inf cells are
// missing and handled as in Fit. Safe for concurrent use after Fit. Once
// ctx ends it stops (within a query tile's work) and returns an error
// wrapping ctx.Err(); a cache it was building is not kept.
func (r *Regressor) Predict(ctx context.Context, Xq [][]float64) ([]float64, error) {
	c := r.fit
	if c == nil {
		return nil, ErrNotFitted
	}
	if len(Xq) == 0 {
		return []float64{}, nil
	}
	ctx, leave, err := r.cores.enter(ctx)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	defer leave()
	zq, err := c.pp.transform(Xq)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	nq := len(Xq)
	if c.constant {
		out := make([]float64, nq)
		for i := range out {
			out[i] = c.output(0, nil, nil) // a constant model has no local scale
		}
		r.mu.Lock()
		r.report = MemoryReport{Policy: r.resolvedPolicy(), DroppedContextRows: r.dropped, Rung: RungNoCache, QueryChunk: min(r.queryBatch, nq)}
		r.report.Attempts = attemptsRan([]Attempt{{Rung: RungNoCache, Outcome: OutcomeSuccess, Reason: ReasonResolved}}, r.report.QueryChunk)
		r.mu.Unlock()
		return out, nil
	}
	qc := r.queryBatch
	if room := r.elementsBudget()/int64(max(c.pp.inCols, 1)) - int64(c.n); int64(qc) > room {
		qc = int(max(room, 1))
	}
	rep := MemoryReport{Policy: r.resolvedPolicy(), DroppedContextRows: r.dropped, Rung: RungNoCache}
	if len(c.layers) > 0 {
		rep.EstCacheGB = gib(r.estBytes(CacheDTypeBF16))
	}
	if r.policy.Cache && r.policy.StreamContext {
		return r.predictStream(ctx, zq, nq, rep)
	}
	tried := []Attempt{{Rung: RungNoCache, Outcome: OutcomeSuccess, Reason: ReasonResolved}}
	read := r.computeReader(c.solveChunk)
	// A query set of several batches gets a cache; so does a second call on
	// the same fit (the worker predicts one context batch by batch), and a
	// cache already built is reused.
	r.mu.Lock()
	again := r.calls > 0 || r.cache != nil
	r.calls++
	r.mu.Unlock()
	if r.policy.Cache && (nq > qc || again) {
		r.mu.Lock()
		if r.cache == nil {
			kc, err := r.resolve(ctx)
			if err != nil {
				r.mu.Unlock()
				return nil, fmt.Errorf("predict: build cache: %w", err)
			}
			r.cache = kc
		}
		kc := r.cache
		r.mu.Unlock()
		rep.Rung, tried = kc.rung, kc.tried
		if kc.layers == nil {
			read = r.computeReader(kc.chunk)
		} else {
			read = r.cacheReader(kc)
			rep.CacheBytes = kc.bytes
			if kc.tier == "device" {
				rep.ResidentGB = gib(kc.bytes)
			}
		}
	}
	out := make([]float64, 0, nq)
	f := c.f
	for lo := 0; lo < nq; {
		hi := min(lo+qc, nq)
		// The batch's score matrix is reserved in device memory, as a
		// GPU pass holds it (the CPU device computes it a few queries at a
		// time); halve the batch on out-of-memory when the policy allows.
		res, err := r.dev.Reserve(int64(hi-lo)*int64(c.n)*headsPerLayer*4, "query batch scores")
		if err != nil {
			if errors.Is(err, ErrOutOfMemory) && r.policy.AdaptiveQueryChunk && qc > 1 {
				qc /= 2
				continue
			}
			return nil, fmt.Errorf("predict: %w", err)
		}
		p, err := c.forward(ctx, zq[lo*f:hi*f], hi-lo, read)
		res.Release()
		if err != nil {
			return nil, fmt.Errorf("predict: %w", err)
		}
		out = append(out, p...)
		lo = hi
	}
	rep.QueryChunk = min(qc, nq)
	rep.Attempts = attemptsRan(tried, rep.QueryChunk)
	r.mu.Lock()
	r.report = rep
	r.mu.Unlock()
	return out, nil
}

// attemptsRan copies the ladder's attempts for one Predict's report: every
// attempt planned the query chunk that ran, the last one ran it.
func attemptsRan(tried []Attempt, queryChunk int) []Attempt {
	out := append([]Attempt(nil), tried...)
	for i := range out {
		out[i].QueryChunk = queryChunk
	}
	return out
}
