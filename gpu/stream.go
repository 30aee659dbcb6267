package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
)

// The stream rungs (policy stream_context): the context's KV cache lives in
// host memory and every pass stages it into device memory one slice of
// rows at a time, so the device holds one slice of one layer and the
// scores of a query batch over that slice, whatever the context's length.
// A head's output over the whole context is combined across slices
// exactly, in the resident forward's order of operations, so a streamed
// prediction has the same bits as the resident rung's at the same
// precision:
//
//   - a solve head's sum over rows continues from slice to slice;
//   - a top-k head keeps its k nearest rows so far (ties to the lower row),
//     and sums their values in row order at the end;
//   - smoothing and local heads weigh rows relative to the nearest row's
//     distance (and a local head by its k-th nearest's), which are known
//     only after the last slice: a first pass over the slices finds them,
//     a second pass sums the weights.
//
// The stream rungs never fall back to the plain loop: when not even one
// slice of anchorBlock rows fits the device, Predict fails with
// ErrOutOfMemory.

// streamSliceRows is the most context rows a stream rung stages at once (a
// multiple of anchorBlock). The GPU budget or an out-of-memory error makes
// slices smaller, down to one anchor block.
const streamSliceRows = 4096

// streams reports whether the policy asks for a stream rung.
func (r *Regressor) streams() bool { return r.policy.Cache && r.policy.StreamContext }

// streamHostBudget is the host memory a streamed cache may take: the
// policy's host budget whatever offload_to_host says (streaming is a host
// tier by definition), unbounded when host RAM is unknown and no absolute
// budget is set (the context itself is in host memory already).
func (r *Regressor) streamHostBudget() int64 {
	p := r.policy
	p.OffloadToHost = true
	if r.hostBytes <= 0 && p.HostBudgetAbsoluteGB == nil {
		return math.MaxInt64
	}
	return p.HostBudgetBytes(r.hostBytes)
}

// stageBytes is the device memory one staged slice of rows needs: its keys
// and values, and one query row's scores over it.
func (r *Regressor) stageBytes(rows int, dtype string) int64 {
	return int64(rows) * (bytesPerRowLayer(r.fit.g, dtype) + headsPerLayer*4)
}

// firstSlice is the slice a stream rung starts at: context_row_chunk when
// set, else streamSliceRows, at most the whole context (rounded up to a
// block) and within the GPU budget, in whole anchor blocks, never below one.
func (r *Regressor) firstSlice(dtype string) int {
	rows := streamSliceRows
	if r.policy.ContextRowChunk != nil {
		rows = *r.policy.ContextRowChunk
	}
	rows = min(rows, (r.fit.n+anchorBlock-1)/anchorBlock*anchorBlock)
	if b, per := r.policy.GPUBudgetBytes(r.dev.Capacity()), bytesPerRowLayer(r.fit.g, dtype); int64(rows)*per > b {
		rows = int(b / per)
	}
	return max(rows/anchorBlock*anchorBlock, anchorBlock)
}

// solveChunksAfterOOM are the GP expert sizes a stream rung retries after
// its build's solve runs out of device memory.
var solveChunksAfterOOM = []int{2048, 1024, 512, 256}

// resolveStream builds the host cache of a stream rung: bf16, or int8 when
// the policy starts there or bf16 exceeds the host budget and quantisation
// is allowed. Before building it checks that one slice can be staged,
// halving the slice on out-of-memory; a build whose GP solve runs out of
// device memory is retried in smaller experts. Every try is recorded.
func (r *Regressor) resolveStream(ctx context.Context) (*kvCache, error) {
	c := r.fit
	hostBudget := r.streamHostBudget()
	var tried []Attempt
	reason := ReasonResolved
	var oom error
	for _, dt := range r.dtypes() {
		if r.estBytes(dt) > hostBudget {
			continue
		}
		slice, chunk := r.firstSlice(dt), c.solveChunk
		for {
			a := Attempt{Rung: "stream_" + dt, CacheDType: dt, Tier: "host", ContextRowChunk: slice, Reason: reason}
			res, err := r.dev.Reserve(r.stageBytes(slice, dt), fmt.Sprintf("one staged slice of %d context rows", slice))
			staged := err == nil
			var kc *kvCache
			if staged {
				res.Release()
				kc, err = r.buildStream(ctx, dt, chunk, slice)
			}
			if err == nil {
				a.Outcome = OutcomeSuccess
				kc.rung, kc.tried = a.Rung, append(tried, a)
				return kc, nil
			}
			if !errors.Is(err, ErrOutOfMemory) {
				return nil, err
			}
			a.Outcome, a.Err = OutcomeOOM, err.Error()
			tried, oom = append(tried, a), err
			reason = ReasonOOMRetry
			if !staged && slice > anchorBlock {
				slice = max(slice/2/anchorBlock*anchorBlock, anchorBlock)
				continue
			}
			if next := smallerChunk(chunk, c.n); staged && next > 0 {
				chunk = next
				continue
			}
			reason = ReasonFallbackAfterOOM
			break
		}
	}
	if oom != nil {
		return nil, fmt.Errorf("stream_context: out of device memory even at the smallest slice and GP expert tried: %w", oom)
	}
	return nil, fmt.Errorf("%w: stream_context: the context's cache (%s at %s) does not fit the host budget (%s)",
		ErrOutOfMemory, FormatBytes(r.estBytes(r.dtypes()[len(r.dtypes())-1])), r.dtypes()[len(r.dtypes())-1], FormatBytes(hostBudget))
}

// smallerChunk is the next expert size below chunk (and below n, the whole
// context) to retry a solve at: the vendor's sizes, then halves down to one
// anchor block; 0 when there is none.
func smallerChunk(chunk, n int) int {
	cur := n
	if chunk > 0 {
		cur = min(chunk, n)
	}
	for _, c := range solveChunksAfterOOM {
		if c < cur {
			return c
		}
	}
	if cur/2 >= anchorBlock {
		return cur / 2
	}
	return 0
}

// buildStream computes every layer into a host cache at dtype; only the GP
// solve's workspace is on the device, one expert of at most chunk rows.
func (r *Regressor) buildStream(ctx context.Context, dtype string, chunk, slice int) (*kvCache, error) {
	c := r.fit
	kc := &kvCache{dtype: dtype, tier: "host", chunk: chunk, slice: slice, bytes: r.estBytes(dtype)}
	for l := range c.layers {
		s, err := c.buildLayerOn(ctx, l, r.dev, chunk, dtype, true)
		if err != nil {
			return nil, err
		}
		kc.layers = append(kc.layers, s)
	}
	return kc, nil
}

// predictStream is Predict on a stream rung: the cache is resolved once
// and reused, and query batches shrink on out-of-memory as Predict's do.
func (r *Regressor) predictStream(ctx context.Context, zq []float64, nq int, rep MemoryReport) ([]float64, error) {
	c := r.fit
	r.mu.Lock()
	if r.cache == nil {
		kc, err := r.resolveStream(ctx)
		if err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("predict: build cache: %w", err)
		}
		r.cache = kc
	}
	kc := r.cache
	r.calls++
	r.mu.Unlock()
	qc := r.queryBatch
	if room := r.elementsBudget()/int64(max(c.pp.inCols, 1)) - int64(kc.slice); int64(qc) > room {
		qc = int(max(room, 1))
	}
	out := make([]float64, 0, nq)
	f := c.f
	for lo := 0; lo < nq; {
		hi := min(lo+qc, nq)
		// One staging buffer of a slice, reused slice after slice, and the
		// batch's scores over it.
		res, err := r.dev.Reserve(int64(kc.slice)*bytesPerRowLayer(c.g, kc.dtype)+int64(hi-lo)*int64(kc.slice)*headsPerLayer*4,
			fmt.Sprintf("a staged slice of %d context rows and its query batch scores", kc.slice))
		if err != nil {
			if errors.Is(err, ErrOutOfMemory) && r.policy.AdaptiveQueryChunk && qc > 1 {
				qc /= 2
				continue
			}
			return nil, fmt.Errorf("predict: %w", err)
		}
		p, err := c.forwardStream(ctx, zq[lo*f:hi*f], hi-lo, kc)
		res.Release()
		if err != nil {
			return nil, fmt.Errorf("predict: %w", err)
		}
		out = append(out, p...)
		lo = hi
	}
	rep.Rung, rep.CacheBytes, rep.QueryChunk = kc.rung, kc.bytes, min(qc, nq)
	rep.Attempts = attemptsRan(kc.tried, rep.QueryChunk)
	r.mu.Lock()
	r.report = rep
	r.mu.Unlock()
	return out, nil
}

// rowSlice copies rows [lo, hi) of the store, as staging a slice into
// device memory does; the values keep the layer's scale.
func (s *layerStore) rowSlice(lo, hi int) *layerStore {
	t := newLayerStore(s.dtype, hi-lo, s.groups)
	t.layer, t.vScale = s.layer, s.vScale
	run := (hi - lo) * s.groups * quadWidth
	for qd := range quads {
		src, dst := s.quadRun(qd, lo), t.quadRun(qd, 0)
		if s.dtype == CacheDTypeInt8 {
			copy(t.kq[dst:dst+run], s.kq[src:])
			copy(t.vq[dst:dst+run], s.vq[src:])
		} else {
			copy(t.kb[dst:dst+run], s.kb[src:])
			copy(t.vb[dst:dst+run], s.vb[src:])
		}
	}
	if s.dtype == CacheDTypeInt8 {
		copy(t.ks, s.ks[lo*s.groups:hi*s.groups])
		copy(t.vs, s.vs[lo*s.groups:hi*s.groups])
	}
	return t
}

// streamHead is one query's running state for one head over the slices
// seen so far.
type streamHead struct {
	sum      float64 // solve: Σ e^(−d/2)·v; smooth, local: Σ w·v (second pass)
	den      float64 // smooth, local: Σ w (second pass)
	dmin     float32 // smooth, local: the nearest row's distance
	scale    float64 // smooth, local: the weights' exponent factor, set between passes
	nearest  []float32
	topRows  []streamRow // top-k: the k nearest rows so far
	needed   bool        // the head's output is read (a readout or far weight)
	twoPass  bool        // smooth or local
	nearestK int         // local: k; top-k: k
}

// streamRow is a context row a top-k head keeps.
type streamRow struct {
	i int
	d float32
	v float32
}

// forwardStream is forward on a stream rung's host cache kc: each layer is
// staged slice by slice into the device buffer the caller reserved, and
// every head's output combined across the slices (see the top of this
// file). Everything outside the layers (trend, edges, far readout, output
// scale) is forward's.
func (c *contextFit) forwardStream(ctx context.Context, zq []float64, nq int, kc *kvCache) ([]float64, error) {
	out, far, edges, err := c.forwardStart(ctx, zq, nq)
	if err != nil || c.constant {
		return out, err
	}
	n := c.n
	farW := func(q, l, h int) float64 {
		if edges != nil && edges[q].u > 0 {
			return c.farFor(edges[q]).w[l][h]
		}
		return 0
	}
	tile := queryTile(nq, kc.slice)
	tiles := sync.Pool{New: func() any {
		b := make([]float32, tile*kc.slice*headsPerLayer)
		return &b
	}}
	for l := range c.layers {
		s := kc.layers[l]
		acc := make([]streamHead, nq*headsPerLayer)
		second := false
		for q := range nq {
			for h := range c.layers[l] {
				hd, a := &c.layers[l][h], &acc[q*headsPerLayer+h]
				a.needed = hd.w != 0 || farW(q, l, h) != 0
				a.twoPass = hd.spec.kind == kindSmooth || hd.spec.kind == kindLocal
				a.dmin = float32(math.Inf(1))
				a.nearestK = min(hd.spec.k, n)
				second = second || (a.needed && a.twoPass)
			}
		}
		first := func(h int, a *streamHead, d []float32, rv *rowView, lo int, sc *streamScratch) {
			switch c.layers[l][h].spec.kind {
			case kindSolve:
				for i, x := range d {
					a.sum += expNeg(-0.5*float64(x)) * float64(rv.vbar[i*headsPerLayer+h])
				}
			case kindSmooth:
				for _, x := range d {
					a.dmin = min(a.dmin, x)
				}
			case kindLocal:
				for _, x := range d {
					a.dmin = min(a.dmin, x)
				}
				a.nearest = keepSmallest(a.nearest, d, a.nearestK, sc)
			default: // kindTopK
				a.topRows = keepNearestRows(a.topRows, d, rv, h, lo, a.nearestK, sc)
			}
		}
		if err := c.streamPass(ctx, s, l, zq, nq, kc.slice, &tiles, acc, false, first); err != nil {
			return nil, err
		}
		if second {
			for i := range acc {
				a := &acc[i]
				if !a.needed || !a.twoPass {
					continue
				}
				a.scale = -0.5
				if c.layers[l][i%headsPerLayer].spec.kind == kindLocal {
					h2 := float64(a.nearest[0])
					for _, x := range a.nearest {
						h2 = max(h2, float64(x))
					}
					if h2 <= 0 {
						h2 = 1e-300
					}
					a.scale = -0.5 / h2
				}
			}
			weigh := func(h int, a *streamHead, d []float32, rv *rowView, _ int, _ *streamScratch) {
				for i, x := range d {
					w := expNeg(a.scale * float64(x-a.dmin))
					a.sum += w * float64(rv.vbar[i*headsPerLayer+h])
					a.den += w
				}
			}
			if err := c.streamPass(ctx, s, l, zq, nq, kc.slice, &tiles, acc, true, weigh); err != nil {
				return nil, err
			}
		}
		for q := range nq {
			for h := range c.layers[l] {
				hd, a := &c.layers[l][h], &acc[q*headsPerLayer+h]
				if !a.needed {
					continue
				}
				o := c.streamOutput(hd, s, h, a)
				out[q] += hd.w * o
				far[q] += farW(q, l, h) * o
			}
		}
	}
	var buf scaleScratch
	for q := range out {
		if edges != nil {
			out[q] = c.leaned(edges[q], zq[q*c.f:(q+1)*c.f], out[q]+edges[q].u*(far[q]-out[q]))
		}
		out[q] = c.output(out[q], zq[q*c.f:(q+1)*c.f], &buf)
	}
	return out, nil
}

// streamOutput is headReduce's result from a head's state after the last
// slice.
func (c *contextFit) streamOutput(hd *head, s *layerStore, h int, a *streamHead) float64 {
	switch hd.spec.kind {
	case kindSolve:
		return a.sum * hd.sf2 * s.vScale[h]
	case kindSmooth, kindLocal:
		if a.den == 0 {
			return 0
		}
		return a.sum / a.den * s.vScale[h]
	default: // kindTopK
		if len(a.topRows) == 0 {
			return 0
		}
		sort.Slice(a.topRows, func(x, y int) bool { return a.topRows[x].i < a.topRows[y].i })
		var num float64
		for _, r := range a.topRows {
			num += float64(r.v)
		}
		return num / float64(len(a.topRows)) * s.vScale[h]
	}
}

// streamScratch is one goroutine's buffers for folding a slice in.
type streamScratch struct {
	sel []float32
	idx []int
}

// streamPass stages layer l's cache s one slice of at most slice rows at a
// time, scores every query against it, and hands each needed head's
// distances to visit (with the slice's first row); secondOnly visits only
// the two-pass heads. A query's heads are visited by one goroutine, slices
// in row order.
func (c *contextFit) streamPass(ctx context.Context, s *layerStore, l int, zq []float64, nq, slice int, tiles *sync.Pool, acc []streamHead, secondOnly bool,
	visit func(h int, a *streamHead, d []float32, rv *rowView, lo int, sc *streamScratch)) error {
	f, qw := c.f, c.g*quadWidth
	for lo := 0; lo < c.n; lo += slice {
		hi := min(lo+slice, c.n)
		m := hi - lo
		rv, err := newRowView(ctx, s.rowSlice(lo, hi))
		if err != nil {
			return err
		}
		b0, nb := lo/anchorBlock, (m+anchorBlock-1)/anchorBlock
		// tiles holds queryTile(nq, slice) queries' planes (forwardStream).
		err = parallelFor(ctx, nq, queryTile(nq, slice), func(a, b int) {
			buf := tiles.Get().(*[]float32)
			defer tiles.Put(buf)
			qks := make([][]float32, b-a)
			d2s := make([][]float32, b-a)
			for t := range qks {
				x := zq[(a+t)*f : (a+t+1)*f]
				qks[t] = make([]float32, nb*c.g*headWidth)
				for k := range nb {
					c.keysAt(l, x, c.anchors[(b0+k)*f:(b0+k+1)*f], qks[t][k*qw:], nb*qw)
				}
				d2s[t] = (*buf)[t*m*headsPerLayer : (t+1)*m*headsPerLayer]
			}
			c.scores(rv, qks, d2s)
			sc := &streamScratch{}
			for t := range qks {
				for h := range headsPerLayer {
					st := &acc[(a+t)*headsPerLayer+h]
					if st.needed && (!secondOnly || st.twoPass) {
						visit(h, st, d2s[t][h*m:(h+1)*m], rv, lo, sc)
					}
				}
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// keepSmallest merges the k smallest of kept and d: the same multiset as
// the k smallest of every distance seen, so its largest is their k-th.
func keepSmallest(kept, d []float32, k int, sc *streamScratch) []float32 {
	sc.sel = append(append(sc.sel[:0], kept...), d...)
	if len(sc.sel) <= k {
		return append(kept[:0], sc.sel...)
	}
	v := kthSmallest(sc.sel, k-1) // reorders sc.sel, keeps its values
	out := kept[:0]
	for _, x := range sc.sel {
		if x < v {
			out = append(out, x)
		}
	}
	for len(out) < k {
		out = append(out, v)
	}
	return out
}

// keepNearestRows merges the k nearest rows of kept and of a slice starting
// at row lo, nearer first and ties to the lower row as topK ranks them.
func keepNearestRows(kept []streamRow, d []float32, rv *rowView, h, lo, k int, sc *streamScratch) []streamRow {
	sc.idx = topK(d, min(k, len(d)), sc.idx)
	for _, i := range sc.idx {
		kept = append(kept, streamRow{i: lo + i, d: d[i], v: rv.vbar[i*headsPerLayer+h]})
	}
	if len(kept) > k {
		sort.Slice(kept, func(x, y int) bool {
			return kept[x].d < kept[y].d || (kept[x].d == kept[y].d && kept[x].i < kept[y].i)
		})
		kept = kept[:k]
	}
	return kept
}
