package gpu

import (
	"context"
	"math"
	"runtime"
	"sort"
	"sync"
)

// layerReader gives the forward pass one layer's keys and values: from a
// resident cache, streamed from the host tier, or computed afresh. done
// releases whatever device memory the layer took.
type layerReader func(ctx context.Context, l int) (s *layerStore, done func(), err error)

// rowView is one layer's keys plus the per-row value of every head,
// averaged over the groups' copies. Every row counts once in a head's
// average, so a normalised head divides by its weights' sum.
type rowView struct {
	s    *layerStore
	vbar []float32 // n×H
	// skip marks the quads whose heads no query of the pass reduces
	// (layerQuads): the difference form's pass leaves their score planes
	// unwritten. The zero value scores every quad.
	skip [quads]bool
	bf16DotState
	fmaDotState
	tiledState
}

func newRowView(ctx context.Context, s *layerStore) (*rowView, error) {
	return newRowViewFor(ctx, s, math.MaxInt)
}

// newRowViewFor is newRowView for a batch of nq queries: with a tiled
// score kernel it tiles the keys here, on the cores parallelFor gives,
// where the batch has at least tiledMinQueries queries, and otherwise
// marks the view untiled (the untiled loop, with the same bits, is cheaper
// than tiling for a few queries).
func newRowViewFor(ctx context.Context, s *layerStore, nq int) (*rowView, error) {
	n, w := s.rows, s.groups*headWidth
	rv := &rowView{s: s, vbar: make([]float32, n*headsPerLayer)}
	err := parallelFor(ctx, n, 1024, func(lo, hi int) {
		v := make([]float32, w)
		inv := 1 / float32(s.groups)
		for i := lo; i < hi; i++ {
			s.getV(i, v)
			for h := range headsPerLayer {
				var vs float32
				for g := range s.groups {
					vs += v[slot(g, h, 0, s.groups)]
				}
				rv.vbar[i*headsPerLayer+h] = vs * inv
			}
		}
	})
	if err == nil && archKernel.scoresTiled != nil && tiledFits(s) {
		if nq >= tiledMinQueries {
			err = rv.buildTiles(ctx, archKernel)
		} else {
			rv.untiled = true
		}
	}
	return rv, err
}

// scoreTile is the most queries scored together in one pass over the rows,
// so each key row is decoded once per tile rather than per query. Sixteen:
// the pass widens each chunk of bf16 keys once per tile, which at four
// queries cost about as much as the kernel itself (docs/BENCHMARKS.md,
// "Wider query tiles"). queryTile picks the tile of a batch.
const scoreTile = 16

// minScoreTile is the tile of a small batch or a large context.
const minScoreTile = 4

// scoreBufBytes bounds one tile's score planes (tile × rows × heads
// float32, one buffer per piece in flight) where the tile is above
// minScoreTile, so a large context keeps the smaller tile's memory.
const scoreBufBytes = 8 << 20

// queryTile is the tile forward splits nq queries into against rows rows:
// scoreTile, less where the score planes would pass scoreBufBytes or the
// batch would give the cores fewer than two pieces each, never below
// minScoreTile. A query's scores do not depend on its tile (scoresWith), so
// neither do the bits.
func queryTile(nq, rows int) int {
	t := min(scoreTile, scoreBufBytes/(max(rows, 1)*headsPerLayer*4), nq/(2*runtime.GOMAXPROCS(0)))
	return max(t, minScoreTile)
}

// scoreChunkFloats bounds the float32 keys (and the tile's query slices
// for them) that the difference form decodes at once: a chunk of rows
// stays in L2 while every query of the tile is scored against it.
const scoreChunkFloats = 16 << 10

// scores writes, for each query t of the tile, d2s[t][h*n+i]: head h's
// squared distance from the query (its key slices qks[t], per anchor block)
// to row i, with the fastest kernel this machine runs.
func (c *contextFit) scores(rv *rowView, qks [][]float32, d2s [][]float32) {
	c.scoresWith(archKernel, rv, qks, d2s)
}

// scoresWith is scores on a given kernel. It makes one pass over the rows
// per quad, so a pass touches a third of the keys and of the queries' key
// slices. Within a pass it decodes a chunk of rows (whole anchor blocks,
// about scoreChunkFloats keys, so it stays in L2) into float32 once, flushes
// each query's slices for the chunk's blocks, and then scores one query
// after the other against the whole chunk: each query's reads and its four
// head planes' writes run in order, a few streams at a time, whatever the
// tile (scoring the whole tile block by block had 16 queries' slices and 64
// head planes in flight, and a tile of 16 lost to one of 4 at 4 groups).
// Each query's sums run in the same order whatever the tile, the chunk and
// the kernel, so the bits depend on none of them.
func (c *contextFit) scoresWith(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := rv.s.rows, c.g, c.g*quadWidth // c.n, or a staged slice's rows
	s := rv.s
	if kern.scoreBF16 != nil && s.dtype != CacheDTypeInt8 {
		c.scoresBF16Dot(kern, rv, qks, d2s)
		return
	}
	if kern.scoreFMA != nil {
		c.scoresFMA(kern, rv, qks, d2s)
		return
	}
	if kern.scoresTiled != nil && !rv.untiled && tiledFits(s) {
		kern.scoresTiled(kern, c, rv, qks, d2s)
		return
	}
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw                                            // one query's slices for one quad
	cb := min(nb, max(1, scoreChunkFloats/(anchorBlock*qw))) // anchor blocks a chunk
	cw := cb * qw                                            // one query's slices for a chunk
	qs := make([]float32, len(qks)*cw)
	k := make([]float32, cb*anchorBlock*qw)
	scale := make([]float32, cb*anchorBlock*g)
	for qd := range quads {
		if rv.skip[qd] {
			continue
		}
		for lo := 0; lo < n; lo += cb * anchorBlock {
			hi := min(lo+cb*anchorBlock, n)
			kc := kern.decodeKeys(s, qd, lo, hi, k, scale)
			b0, b1 := lo/anchorBlock, (hi+anchorBlock-1)/anchorBlock
			for t, qk := range qks {
				qt := qs[t*cw : t*cw+(b1-b0)*qw]
				kern.flush(qt, qk[qd*pw+b0*qw:qd*pw+b1*qw])
				d2 := d2s[t][qd*quadHeads*n:]
				for blo := lo; blo < hi; blo += anchorBlock {
					bhi := min(blo+anchorBlock, hi)
					off := (blo - lo) / anchorBlock * qw
					kern.score(kc[(blo-lo)*qw:(bhi-lo)*qw], qt[off:off+qw], d2, n, blo)
				}
			}
		}
	}
}

// tinyKeyBits is math.Float32bits(0x1p-40). The score pass reads a key or
// query coordinate below 2⁻⁴⁰ length scales (from features the fit found
// irrelevant) as 0. Then a difference of two coordinates is 0 or at least
// 2⁻⁶³, so its square and every sum stay normal floats: subnormal results
// cost x86 a microcode assist each, about a hundred times a plain multiply.
const tinyKeyBits = 0x2b800000

// flushTiny is x, or 0 if |x| < 2⁻⁴⁰ (NaN stays NaN).
func flushTiny(x float32) float32 {
	if math.Float32bits(x)&0x7fffffff < tinyKeyBits {
		return 0
	}
	return x
}

// attendKernel is one implementation of the score pass's inner loops. Every
// implementation of the difference form gives the same bits as
// portableKernel (attend_simd_test.go holds them to it), so choosing one is
// only a matter of speed; a kernel with scoreBF16 scores a bf16 store in the
// dot form instead (attend_bf16dot.go), within a stated bound of its Go twin
// bf16DotKernel and of the difference form.
type attendKernel struct {
	name string
	// flush writes flushTiny of every src to dst.
	flush func(dst, src []float32)
	// widen writes flushTiny of the float32 value of every bf16 in src to dst.
	widen func(dst []float32, src []uint16)
	// dequant writes flushTiny of int8 keys times their group's scale to
	// dst, quadWidth keys per scale.
	dequant func(dst []float32, q []int8, scale []float32)
	// score writes, for rows i0, i0+1, … with float32 keys k (row-major,
	// len(q) each), d2[h*n+i]: head h's squared distance from the query's
	// key slices q to row i.
	score func(k, q, d2 []float32, n, i0 int)
	// scoreBF16, if set, scores a bf16 store's keys as stored, in the dot
	// form (scoreBF16Go is its contract); int8 stores keep widen/score.
	scoreBF16 func(k, qhi, qlo []uint16, qn, kn, d2 []float32, n, i0 int)
	// scoreFMA, if set, scores decoded keys in the float32 dot form
	// (attend_fma.go; scoreFMAGo is its contract) instead of score.
	scoreFMA func(k, q, qn, kn, d2 []float32, n, i0 int)
	// scoreFMA2, if set, is scoreFMA for two queries at once, each to the
	// bit as scoreFMA scores it alone.
	scoreFMA2 func(k, q0, q1, qn0, qn1, kn, d20, d21 []float32, n, i0 int)
	// scoresTiled, if set, is the whole of scoresWith for this kernel on
	// a store that tiledFits, in the difference form with portableKernel's
	// bits (a loop over tiles of transposed rows: attend_avx512_amd64.go).
	scoresTiled func(kern attendKernel, c *contextFit, rv *rowView, qks [][]float32, d2s [][]float32)
	// tile, with scoresTiled, writes a quad's bf16 keys in tiledKeys'
	// layout (tileBF16Go is its contract).
	tile func(dst, src []uint16, rows, qw int)
}

// portableKernel is the reference implementation, in plain Go.
var portableKernel = attendKernel{name: "go", flush: flushGo, widen: widenBF16Go, dequant: dequantInt8Go, score: scoreRowsGo}

// fmaDotKernel is the Go twin of the AVX2 FMA kernel, the float32 dot form
// for both stores; like bf16DotKernel it runs only when forced
// (REGRESSD_SCORE_KERNEL=go-fmadot).
var fmaDotKernel = func() attendKernel {
	k := portableKernel
	k.name, k.scoreFMA = "go-fmadot", scoreFMAGo
	return k
}()

// bf16DotKernel is the Go twin of the AVX512-BF16 kernel: the dot form for
// bf16 stores, the portable difference form for int8 ones. It runs nowhere
// by default (it is slower than the difference form in Go); the tests hold
// the assembly to it, and REGRESSD_SCORE_KERNEL=go-bf16dot runs the engine
// on it to measure the dot form's accuracy on a machine without the
// instruction.
var bf16DotKernel = func() attendKernel {
	k := portableKernel
	k.name, k.scoreBF16 = "go-bf16dot", scoreBF16Go
	return k
}()

func flushGo(dst, src []float32) {
	dst = dst[:len(src)]
	for e, x := range src {
		dst[e] = flushTiny(x)
	}
}

func widenBF16Go(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for e, b := range src {
		dst[e] = flushTiny(fromBF16(b))
	}
}

// dequantInt8Go is getK's arithmetic over a run of groups.
func dequantInt8Go(dst []float32, q []int8, scale []float32) {
	dst, q = dst[:len(scale)*quadWidth], q[:len(scale)*quadWidth]
	for g, sc := range scale {
		for e := range quadWidth {
			dst[g*quadWidth+e] = flushTiny(float32(q[g*quadWidth+e]) * sc)
		}
	}
}

// scoreRowsGo sums each of a quad's quadWidth coordinates' squared differences
// over the groups in its own accumulator (one vector lane in the SIMD
// kernels), then adds each head's pair. The float32 conversions keep the
// compiler from fusing a multiply into the add, which the SIMD kernels do
// not do either.
func scoreRowsGo(k, q, d2 []float32, n, i0 int) {
	w := len(q)
	for r := range len(k) / w {
		kr := k[r*w : (r+1)*w]
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		for g := 0; g < w; g += quadWidth {
			kg, qg := kr[g:g+quadWidth:g+quadWidth], q[g:g+quadWidth:g+quadWidth]
			x0, x1, x2, x3 := qg[0]-kg[0], qg[1]-kg[1], qg[2]-kg[2], qg[3]-kg[3]
			x4, x5, x6, x7 := qg[4]-kg[4], qg[5]-kg[5], qg[6]-kg[6], qg[7]-kg[7]
			a0 += float32(x0 * x0)
			a1 += float32(x1 * x1)
			a2 += float32(x2 * x2)
			a3 += float32(x3 * x3)
			a4 += float32(x4 * x4)
			a5 += float32(x5 * x5)
			a6 += float32(x6 * x6)
			a7 += float32(x7 * x7)
		}
		i := i0 + r
		d2[i], d2[n+i], d2[2*n+i], d2[3*n+i] = a0+a1, a2+a3, a4+a5, a6+a7
	}
}

// headReduce turns head h's squared distances into its output (in units of
// the standardised target).
func (c *contextFit) headReduce(hd *head, h int, rv *rowView, d2 []float32, sel []float32, idx []int) float64 {
	n := c.n
	switch hd.spec.kind {
	case kindSolve:
		var out float64
		for i, d := range d2 {
			out += expNeg(-0.5*float64(d)) * float64(rv.vbar[i*headsPerLayer+h])
		}
		return out * hd.sf2 * rv.s.vScale[h]
	case kindSmooth, kindLocal:
		dmin := float32(math.Inf(1))
		for _, d := range d2 {
			dmin = min(dmin, d)
		}
		scale := -0.5
		if hd.spec.kind == kindLocal {
			copy(sel, d2)
			h2 := float64(kthSmallest(sel[:n], min(hd.spec.k, n)-1))
			if h2 <= 0 {
				h2 = 1e-300
			}
			scale = -0.5 / h2
		}
		var num, den float64
		for i, d := range d2 {
			w := expNeg(scale * float64(d-dmin))
			num += w * float64(rv.vbar[i*headsPerLayer+h])
			den += w
		}
		if den == 0 {
			return 0
		}
		return num / den * rv.s.vScale[h]
	default: // kindTopK
		k := topK(d2, min(hd.spec.k, n), idx)
		if len(k) == 0 {
			return 0
		}
		var num float64
		for _, i := range k {
			num += float64(rv.vbar[i*headsPerLayer+h])
		}
		return num / float64(len(k)) * rv.s.vScale[h]
	}
}

// topK returns the indices of the k smallest d (ties to the lower index),
// sorted by index so sums over them have a fixed order.
func topK(d []float32, k int, buf []int) []int {
	h := buf[:0]
	less := func(a, b int) bool { return d[a] < d[b] || (d[a] == d[b] && a < b) }
	// h is a max-heap of the best k so far under less.
	up := func(j int) {
		for j > 0 {
			p := (j - 1) / 2
			if !less(h[p], h[j]) {
				break
			}
			h[p], h[j] = h[j], h[p]
			j = p
		}
	}
	down := func() {
		j := 0
		for {
			l, r, m := 2*j+1, 2*j+2, j
			if l < len(h) && less(h[m], h[l]) {
				m = l
			}
			if r < len(h) && less(h[m], h[r]) {
				m = r
			}
			if m == j {
				return
			}
			h[m], h[j] = h[j], h[m]
			j = m
		}
	}
	for i := range d {
		if len(h) < k {
			h = append(h, i)
			up(len(h) - 1)
		} else if k > 0 && less(i, h[0]) {
			h[0] = i
			down()
		}
	}
	sort.Ints(h)
	return h
}

// forward predicts one batch of standardised query rows zq (nq×f), reading
// each layer from read. Queries are spread over the cores in pieces of
// queryTile; each query is computed start to end by one goroutine, and its
// scores do not depend on its tile, so the bits never depend on GOMAXPROCS.
// A piece's scores (its queries' squared distances to every row for every
// head, tile·n·H float32, above minScoreTile at most scoreBufBytes) live in a
// buffer reused from piece to piece, so host memory holds only the pieces
// in flight, not the batch's whole score matrix that the device reserves.
// It stops with an error wrapping ctx.Err() once ctx ends.
func (c *contextFit) forward(ctx context.Context, zq []float64, nq int, read layerReader) ([]float64, error) {
	out, far, edges, err := c.forwardStart(ctx, zq, nq)
	if err != nil || c.constant {
		return out, err
	}
	f, n := c.f, c.n
	w := len(c.anchors) / f * c.g * headWidth // a query's key slices
	tile := queryTile(nq, n)
	// A piece's buffer: its score planes, then its queries' key slices
	// (every coordinate of which queryKeys writes), reused from piece to
	// piece rather than allocated and zeroed per query and layer.
	tiles := sync.Pool{New: func() any {
		b := make([]float32, tile*(n*headsPerLayer+w))
		return &b
	}}
	for l := range c.layers {
		qs := c.layerQueries(l, nq, edges)
		if len(qs) == 0 {
			continue // no head of the layer counts for any query: not read
		}
		s, done, err := read(ctx, l)
		if err != nil {
			return nil, err
		}
		rv, err := newRowViewFor(ctx, s, len(qs))
		if err != nil {
			done()
			return nil, err
		}
		rv.skip = c.layerQuads(l)
		err = parallelFor(ctx, len(qs), tile, func(lo, hi int) {
			buf := tiles.Get().(*[]float32)
			defer tiles.Put(buf)
			qks := make([][]float32, hi-lo)
			d2s := make([][]float32, hi-lo)
			for t := range qks {
				q := qs[lo+t]
				qks[t] = (*buf)[tile*n*headsPerLayer+t*w : tile*n*headsPerLayer+(t+1)*w]
				c.queryKeys(l, zq[q*f:(q+1)*f], qks[t])
				d2s[t] = (*buf)[t*n*headsPerLayer : (t+1)*n*headsPerLayer]
			}
			c.scores(rv, qks, d2s)
			sel := make([]float32, n)
			idx := make([]int, 0, 64)
			for t := range qks {
				q := qs[lo+t]
				for h := range c.layers[l] {
					hd := &c.layers[l][h]
					wf := 0.0
					if edges != nil && edges[q].u > 0 {
						wf = c.farFor(edges[q]).w[l][h]
					}
					if hd.w == 0 && wf == 0 {
						continue
					}
					o := c.headReduce(hd, h, rv, d2s[t][h*n:(h+1)*n], sel, idx)
					out[q] += hd.w * o
					far[q] += wf * o
				}
			}
		})
		done()
		if err != nil {
			return nil, err
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

// layerQueries lists, in order, the queries of a batch of nq that layer l
// counts for: all of them where one of its heads has a readout weight, else
// those with a far share (edges) whose far readout weighs one of its heads.
// forward skips every other query's scores in the layer, and the whole
// layer (not even read: an uncached pass does not build it) where none is
// left; those queries reduced no head of it anyway, so the bits are the
// same. The readout usually weighs a few heads: on a 10,000-row smooth
// table two layers of four counted only for queries far from the context.
func (c *contextFit) layerQueries(l, nq int, edges []queryEdge) []int {
	qs := make([]int, 0, nq)
	for h := range c.layers[l] {
		if c.layers[l][h].w != 0 {
			for q := range nq {
				qs = append(qs, q)
			}
			return qs
		}
	}
	if edges == nil {
		return qs
	}
	for q := range nq {
		if edges[q].u <= 0 {
			continue
		}
		if fr := c.farFor(edges[q]); fr != nil {
			for _, wf := range fr.w[l] {
				if wf != 0 {
					qs = append(qs, q)
					break
				}
			}
		}
	}
	return qs
}

// layerQuads marks the quads of layer l none of whose heads a readout
// (near, or either far one) weighs: forward reduces no head of them, so
// their scores are not computed (the difference form's pass skips them;
// the other kernels score them unread).
func (c *contextFit) layerQuads(l int) [quads]bool {
	var skip [quads]bool
	for qd := range quads {
		skip[qd] = true
		for h := qd * quadHeads; h < (qd+1)*quadHeads; h++ {
			if c.layers[l][h].w != 0 {
				skip[qd] = false
			}
			if c.edge != nil {
				for _, fr := range []*farReadout{c.edge.beyond, c.edge.gap} {
					if fr != nil && l < len(fr.w) && fr.w[l][h] != 0 {
						skip[qd] = false
					}
				}
			}
		}
	}
	return skip
}

// forwardStart is what every forward pass does before the layers: the
// constant model's answer (c.constant), else each query's trend term in
// out, and, for queries away from the context (edge.go), their edges and
// the far readout's trend term in far; each query's output ends as
// (1−u)·out + u·far.
func (c *contextFit) forwardStart(ctx context.Context, zq []float64, nq int) (out, far []float64, edges []queryEdge, err error) {
	out = make([]float64, nq)
	if c.constant {
		for q := range out {
			out[q] = c.output(0, nil, nil) // a constant model has no local scale
		}
		return out, nil, nil, nil
	}
	f := c.f
	if edges, err = c.queryEdges(ctx, zq, nq); err != nil {
		return nil, nil, nil, err
	}
	far = make([]float64, nq)
	var buf []float64
	for q := range nq {
		out[q], far[q] = c.primal(edges, q, zq[q*f:(q+1)*f], c.tr.eval(zq[q*f:(q+1)*f], buf))
	}
	return out, far, edges, nil
}

// decodeKeys widens (bf16) or dequantises (int8) the keys of rows lo..hi of
// quad qd in store s into k, as float32 (scale: scratch for int8's scales,
// one per row and group); it returns the filled part of k.
func (kern attendKernel) decodeKeys(s *layerStore, qd, lo, hi int, k, scale []float32) []float32 {
	g, qw := s.groups, s.groups*quadWidth
	kc, at := k[:(hi-lo)*qw], s.quadRun(qd, lo)
	if s.dtype == CacheDTypeInt8 {
		for j, code := range s.ks[lo*g : hi*g] {
			scale[j] = int8Scale[code]
		}
		kern.dequant(kc, s.kq[at:at+len(kc)], scale[:(hi-lo)*g])
	} else {
		kern.widen(kc, s.kb[at:at+len(kc)])
	}
	return kc
}
