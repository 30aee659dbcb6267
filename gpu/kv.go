package gpu

import (
	"context"
	"fmt"
	"math"
)

// The KV cache. For every layer l, feature group g (features 2g and 2g+1)
// and context row i it holds a key vector and a value vector of width E =
// headWidth, as the memory policy's size estimate assumes:
//
//	key[l][i][g][h, c]   = (z[i][2g+c] − anchor[block(i)][2g+c]) / ℓ_h[2g+c]
//	value[l][i][g][h, 0] = hi digit of v_h[i] / vScale_h
//	value[l][i][g][h, 1] = lo digit
//
// for head h of the layer and c ∈ {0, 1} (the missing half of an odd last
// pair is 0); slot says where (h, c) sits. A query's squared distance to row
// i for head h is the sum over groups of its 2-wide key slices, so every
// group's key is read by every head. The value is the head's value for the
// row (the GP solve α for solve heads, the target for the others); every
// group's cell carries it, like the per-cell values of the layout the
// policy talks about, and the kernel averages the groups' copies. Storage
// is bf16, or int8 with one absmax scale per row, group and K or V vector,
// kept as a one-byte code (quantInt8).
//
// Every row counts once in a head's average, so a value needs no count
// channel; its second channel is a second digit instead: bf16 keeps
// hi = bf16(v) and lo = bf16(v − hi); int8 keeps hi = round(v/s) and
// lo = round((v/s − hi)·127) under the vector's scale s. Solved values
// cancel one another and need the digits most; for smoothed targets they
// lift int8 from 1/127 of the largest value to about 1/127².
//
// In memory each side is quad-major, [quad][row][group][quadWidth], so the
// score kernels read one quad of a block of rows as one contiguous run; a
// group's vector is its quads' slices together, and int8 scales the whole
// vector with one code.

// layerStore is one layer's keys and values for rows [0, rows).
type layerStore struct {
	layer  int
	vScale [headsPerLayer]float64 // values are stored as v/vScale, |v/vScale| ≤ 1
	dtype  string
	rows   int
	groups int
	kb, vb []uint16 // bf16
	kq, vq []int8   // int8
	ks, vs []uint8  // int8: each row's and group's scale code, [row][group]
}

// bytesPerRowLayer is the cache size of one row in one layer.
func bytesPerRowLayer(groups int, dtype string) int64 {
	if dtype == CacheDTypeInt8 {
		return int64(groups) * 2 * (headWidth + 1)
	}
	return int64(groups) * 2 * headWidth * 2
}

func newLayerStore(dtype string, rows, groups int) *layerStore {
	s := &layerStore{dtype: dtype, rows: rows, groups: groups}
	n := rows * groups * headWidth
	if dtype == CacheDTypeInt8 {
		s.kq, s.vq = make([]int8, n), make([]int8, n)
		s.ks, s.vs = make([]uint8, rows*groups), make([]uint8, rows*groups)
	} else {
		s.kb, s.vb = make([]uint16, n), make([]uint16, n)
	}
	return s
}

func (s *layerStore) bytes() int64 { return int64(s.rows) * bytesPerRowLayer(s.groups, s.dtype) }

// clone copies the store, as streaming an offloaded layer into device
// memory does.
func (s *layerStore) clone() *layerStore {
	c := *s
	c.kb, c.vb = append([]uint16(nil), s.kb...), append([]uint16(nil), s.vb...)
	c.kq, c.vq = append([]int8(nil), s.kq...), append([]int8(nil), s.vq...)
	c.ks, c.vs = append([]uint8(nil), s.ks...), append([]uint8(nil), s.vs...)
	return &c
}

// quadRun is the offset in a side's storage of quad qd of row i: the
// groups × quadWidth values of that quad, contiguous.
func (s *layerStore) quadRun(qd, i int) int { return (qd*s.rows + i) * s.groups * quadWidth }

// lane is where coordinate c of head h sits within one group's vector.
func lane(h, c int) int { return slot(0, h, c, 1) }

// vector gathers group g's E values from a row's vectors (slot layout).
func (s *layerStore) vector(row []float32, g int, vec *[headWidth]float32) {
	for h := range headsPerLayer {
		for c := range 2 {
			vec[lane(h, c)] = row[slot(g, h, c, s.groups)]
		}
	}
}

// putInt8 quantises row i's group vectors into q with their scale codes;
// for values (digits), each head's pair is its value in two digits.
func (s *layerStore) putInt8(i int, row []float32, q []int8, codes []uint8, digits bool) {
	var vec [headWidth]float32
	var qv [headWidth]int8
	for g := range s.groups {
		s.vector(row, g, &vec)
		if digits {
			for h := range headsPerLayer {
				vec[lane(h, 1)] = 0
			}
		}
		code := quantInt8(vec[:], qv[:])
		codes[i*s.groups+g] = code
		if sc := int8Scale[code]; digits && sc > 0 {
			for h := range headsPerLayer {
				x := vec[lane(h, 0)] / sc
				hi := float32(math.RoundToEven(float64(x)))
				lo := float32(math.RoundToEven(float64((x - hi) * 127)))
				qv[lane(h, 0)] = int8(hi)
				qv[lane(h, 1)] = int8(min(max(lo, -127), 127))
			}
		}
		for qd := range quads {
			copy(q[s.quadRun(qd, i)+g*quadWidth:][:quadWidth], qv[qd*quadWidth:])
		}
	}
}

// putBF16 rounds row i's vectors into b.
func (s *layerStore) putBF16(i int, row []float32, b []uint16) {
	qw := s.groups * quadWidth
	for qd := range quads {
		dst := b[s.quadRun(qd, i):][:qw]
		for o, x := range row[qd*qw : (qd+1)*qw] {
			dst[o] = toBF16(x)
		}
	}
}

// putK stores row i's float32 key vectors (slot layout).
func (s *layerStore) putK(i int, k []float32) {
	if s.dtype == CacheDTypeInt8 {
		s.putInt8(i, k, s.kq, s.ks, false)
		return
	}
	s.putBF16(i, k, s.kb)
}

// putV stores row i's float32 value vectors; each head's second channel
// is ignored and rewritten as the value's low digit.
func (s *layerStore) putV(i int, v []float32) {
	if s.dtype == CacheDTypeInt8 {
		s.putInt8(i, v, s.vq, s.vs, true)
		return
	}
	s.putBF16(i, v, s.vb)
	for g := range s.groups {
		for h := range headsPerLayer {
			o := slot(g, h, 0, s.groups)
			at := s.quadRun(h/quadHeads, i) + o%(s.groups*quadWidth)
			s.vb[at+1] = toBF16(v[o] - fromBF16(s.vb[at]))
		}
	}
}

// getK writes row i's dequantised key vectors into k.
func (s *layerStore) getK(i int, k []float32) { s.decodeRow(i, s.kq, s.ks, s.kb, k) }

// getV writes row i's dequantised values into v: each head's value
// channel holds hi+lo; the second channel is left as decoded.
func (s *layerStore) getV(i int, v []float32) {
	s.decodeRow(i, s.vq, s.vs, s.vb, v)
	qw := s.groups * quadWidth
	for g := range s.groups {
		for h := range headsPerLayer {
			o := slot(g, h, 0, s.groups)
			if s.dtype == CacheDTypeInt8 {
				q := s.vq[s.quadRun(h/quadHeads, i)+o%qw:]
				v[o] = (float32(q[0]) + float32(q[1])/127) * int8Scale[s.vs[i*s.groups+g]]
			} else {
				v[o] += v[o+1]
			}
		}
	}
}

// decodeRow writes row i of one side of the store — int8 codes q with
// their per-group scale codes, or bf16 b — as float32 into dst.
func (s *layerStore) decodeRow(i int, q []int8, codes []uint8, b []uint16, dst []float32) {
	qw := s.groups * quadWidth
	for qd := range quads {
		at, out := s.quadRun(qd, i), dst[qd*qw:(qd+1)*qw]
		if s.dtype != CacheDTypeInt8 {
			for o := range out {
				out[o] = fromBF16(b[at+o])
			}
			continue
		}
		for g := range s.groups {
			scale := int8Scale[codes[i*s.groups+g]]
			for e := range quadWidth {
				out[g*quadWidth+e] = float32(q[at+g*quadWidth+e]) * scale
			}
		}
	}
}

// buildLayer computes layer l's keys and values for every row into a new
// store of the given precision. Keys are stored first; the solve heads'
// values are then solved on the keys as stored (positions rebuilt from the
// rounded keys and their anchors), so each solve head is an exact GP on the
// inputs the queries will see and the solve does not amplify rounding. The
// solve is where context rows attend to context rows; its workspace is
// reserved on dev, in experts of at most chunk rows. It stops with an
// error wrapping ctx.Err() once ctx ends.
func (c *contextFit) buildLayer(ctx context.Context, l int, dev Device, chunk int, dtype string) (*layerStore, error) {
	return c.buildLayerOn(ctx, l, dev, chunk, dtype, false)
}

// buildLayerOn is buildLayer; staged keeps the solve's positions in host
// memory and reserves one expert's on dev, as the stream rungs do, so its
// device workspace does not grow with the context.
func (c *contextFit) buildLayerOn(ctx context.Context, l int, dev Device, chunk int, dtype string, staged bool) (*layerStore, error) {
	s := newLayerStore(dtype, c.n, c.g)
	s.layer = l
	w := c.g * headWidth
	if err := parallelFor(ctx, c.n, 256, func(lo, hi int) {
		k := make([]float32, w)
		for i := lo; i < hi; i++ {
			c.rowKeys(l, i, k)
			s.putK(i, k)
		}
	}); err != nil {
		return nil, err
	}
	var vals [headsPerLayer][]float64
	for h := range c.layers[l] {
		hd := &c.layers[l][h]
		vals[h] = c.ys
		if hd.spec.kind == kindSolve {
			if hd.stored != nil && dtype == CacheDTypeBF16 && solveExperts(c.n, chunk) == solveExperts(c.n, c.solveChunk) {
				// Fit solved them on these keys (storedHeads): the
				// same bits solveStored would give.
				vals[h] = hd.stored
			} else {
				a, err := c.solveStored(ctx, s, h, hd, dev, chunk, staged)
				if err != nil {
					return nil, err
				}
				vals[h] = a
			}
		}
		// Normalise by this build's own largest value, so the values span
		// the storage range whatever the solve produced.
		for _, v := range vals[h] {
			s.vScale[h] = max(s.vScale[h], math.Abs(v))
		}
		if s.vScale[h] == 0 {
			s.vScale[h] = 1
		}
	}
	if err := parallelFor(ctx, c.n, 256, func(lo, hi int) {
		v := make([]float32, w)
		for i := lo; i < hi; i++ {
			c.rowValues(s, vals, i, v)
			s.putV(i, v)
		}
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// solveStored solves head h's GP on the positions its stored keys encode.
func (c *contextFit) solveStored(ctx context.Context, s *layerStore, h int, hd *head, dev Device, chunk int, staged bool) ([]float64, error) {
	n, f := c.n, c.f
	nc := solveExperts(n, chunk)
	m := (n + nc - 1) / nc
	// One expert's kernel matrix (factored in place), the positions and a
	// few vectors: every row's, or one expert's when staged.
	posRows := n
	if staged {
		posRows = m
	}
	res, err := dev.Reserve(int64(m)*int64(m)*8+int64(posRows)*int64(f+4)*8, fmt.Sprintf("solve workspace for %d rows", m))
	if err != nil {
		return nil, err
	}
	defer res.Release()
	pos := make([]float64, n*f)
	w := c.g * headWidth
	// Squared rounding error of the stored keys, summed per piece of rows
	// so the total does not depend on scheduling.
	const piece = 256
	sq := make([]float64, (n+piece-1)/piece)
	if err := parallelFor(ctx, n, piece, func(lo, hi int) {
		k, exact := make([]float32, w), make([]float32, w)
		for i := lo; i < hi; i++ {
			s.getK(i, k)
			c.rowKeys(s.layer, i, exact)
			a := c.anchors[(i/anchorBlock)*f : (i/anchorBlock+1)*f]
			for d := range f {
				e := slot(d/2, h, d%2, c.g)
				pos[i*f+d] = a[d]*hd.inv[d] + float64(k[e])
				sq[lo/piece] += float64(k[e]-exact[e]) * float64(k[e]-exact[e])
			}
		}
	}); err != nil {
		return nil, err
	}
	var mse float64
	for _, v := range sq {
		mse += v
	}
	mse /= float64(n)
	ones := make([]float64, f)
	for d := range ones {
		ones[d] = 1
	}
	hp := c.hyper[hd.spec.metric]
	// Errors in variables: a key rounded by δ moves the kernel by about
	// sf2·δ (length-scale units), which acts as extra target noise. Adding
	// its variance keeps the solve from fitting the rounding, which int8
	// keys would otherwise turn into spikes.
	sn2 := hp.sn2 + hp.sf2*mse
	sr, err := fitSolve(ctx, pos, n, f, ones, hp.sf2, sn2, c.ys, chunk, make([]bool, n))
	return sr.alpha, err
}

// storedHeads is buildHeads on the context (canonical rows, the model's
// experts) with each solve head solved, as solveStored solves it, on the
// positions its keys encode in a bf16 cache: the leave-one-out the readout
// is scored on is then the solve's the queries read, and the bf16 cache
// build (and every uncached pass) takes the values from the head (stored)
// instead of solving again, with the same bits. Fit takes this path past
// largeSolveRows, where the cache build's solve was a third of a Predict.
func (c *contextFit) storedHeads(ctx context.Context, cfg modelConfig, score []bool) ([][headsPerLayer]head, error) {
	n, f := c.n, c.f
	ones := make([]float64, f)
	for d := range ones {
		ones[d] = 1
	}
	layers, err := buildHeadsWith(cfg, c.ys, c.hyper[0], c.hyper[1], func(h *head, hp gpHyper) (solveResult, error) {
		pos, mse, err := c.bf16Positions(ctx, h.inv)
		if err != nil {
			return solveResult{}, err
		}
		return fitSolve(ctx, pos, n, f, ones, hp.sf2, hp.sn2+hp.sf2*mse, c.ys, c.solveChunk, score)
	})
	if err != nil {
		return nil, err
	}
	for l := range layers {
		for k := range layers[l] {
			if hd := &layers[l][k]; hd.spec.kind == kindSolve {
				hd.stored = hd.values
			}
		}
	}
	return layers, nil
}

// bf16Positions is solveStored's positions and mean squared key rounding
// for a bf16 store, for a head with inverse length scales inv: each key
// (keysAt's formula) rounded to bf16 as putK stores it and getK reads it,
// the rounding summed in solveStored's pieces and order.
func (c *contextFit) bf16Positions(ctx context.Context, inv []float64) ([]float64, float64, error) {
	n, f := c.n, c.f
	pos := make([]float64, n*f)
	const piece = 256
	sq := make([]float64, (n+piece-1)/piece)
	if err := parallelFor(ctx, n, piece, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			a := c.anchors[(i/anchorBlock)*f : (i/anchorBlock+1)*f]
			for d := range f {
				exact := clampKey((c.z[i*f+d] - a[d]) * inv[d])
				k := fromBF16(toBF16(exact))
				pos[i*f+d] = a[d]*inv[d] + float64(k)
				sq[lo/piece] += float64(k-exact) * float64(k-exact)
			}
		}
	}); err != nil {
		return nil, 0, err
	}
	var mse float64
	for _, v := range sq {
		mse += v
	}
	return pos, mse / float64(n), nil
}

// rowKeys writes row i's float32 key vectors for layer l.
func (c *contextFit) rowKeys(l, i int, k []float32) {
	f := c.f
	c.keysAt(l, c.z[i*f:(i+1)*f], c.anchors[(i/anchorBlock)*f:(i/anchorBlock+1)*f], k, c.g*quadWidth)
}

// keysAt writes the key vectors (groups × E, slot layout) of the point x
// relative to the anchor a for layer l: the one formula for context rows
// and queries. Quad qd's slices go to k[qd·stride:], so a query can lay its
// blocks' quads out contiguously.
func (c *contextFit) keysAt(l int, x, a []float64, k []float32, stride int) {
	f := c.f
	// x − a once for every head (the same values keysAtGo computes per
	// head, so the same bits).
	var buf [64]float64
	diff := buf[:0]
	if f > len(buf) {
		diff = make([]float64, 0, f)
	}
	for d := range f {
		diff = append(diff, x[d]-a[d])
	}
	for h := range c.layers[l] {
		inv := c.layers[l][h].inv[:f]
		kq := k[(h/quadHeads)*stride:]
		lane := 2 * (h % quadHeads)
		for d, v := range diff {
			kq[(d/2)*quadWidth+lane+d%2] = clampKey(v * inv[d])
		}
		if f < 2*c.g {
			kq[(f/2)*quadWidth+lane+f%2] = 0
		}
	}
}

// keysAtGo is keysAt as it was written first, coordinate by coordinate:
// the test's twin.
func (c *contextFit) keysAtGo(l int, x, a []float64, k []float32, stride int) {
	f := c.f
	for h := range c.layers[l] {
		hd := &c.layers[l][h]
		kq := k[(h/quadHeads)*stride:]
		for d := range 2 * c.g {
			var v float32
			if d < f {
				v = clampKey((x[d] - a[d]) * hd.inv[d])
			}
			kq[(d/2)*quadWidth+2*(h%quadHeads)+d%2] = v
		}
	}
}

// rowValues writes row i's float32 values for the store's layer into each
// head's value channel (putV writes the second digit).
func (c *contextFit) rowValues(s *layerStore, vals [headsPerLayer][]float64, i int, v []float32) {
	for g := range c.g {
		for h := range headsPerLayer {
			v[slot(g, h, 0, c.g)] = float32(vals[h][i] / s.vScale[h])
		}
	}
}

// queryKeys writes the query's key slices relative to every anchor block,
// quad-major: qk[quad][b][g][2·(h mod 4)+c], the same formula as the context
// keys.
func (c *contextFit) queryKeys(l int, x []float64, qk []float32) {
	if c.queryKeysFast(l, x, qk) || c.queryKeysAVX2(l, x, qk) {
		return
	}
	f := c.f
	qw := c.g * quadWidth
	nb := len(c.anchors) / f
	for b := range nb {
		c.keysAt(l, x, c.anchors[b*f:(b+1)*f], qk[b*qw:], nb*qw)
	}
}

// invLanes writes layer l's inverse length scales as the vector query keys
// read them (queryKeysFast): for quad qd, group gi and lane 2·hh+c, head
// 4·qd+hh's scale of feature 2·gi+c, 0 past the features.
func (c *contextFit) invLanes(l int, dst []float64) {
	g := c.g
	for qd := range quads {
		for gi := range g {
			for e := range quadWidth {
				var v float64
				if d := 2*gi + e%2; d < c.f {
					v = c.layers[l][qd*quadHeads+e/2].inv[d]
				}
				dst[(qd*g+gi)*quadWidth+e] = v
			}
		}
	}
}

// keyClamp bounds key coordinates, in length scales from the block anchor.
// Past a few length scales a coordinate only says "far" (the kernels are
// e^−½d² and the top-k heads rank far rows last anyway), and a binary
// column with a tiny fitted length scale would otherwise set the int8 scale
// of the whole vector and wash out every other head's coordinates. Queries
// are clamped the same way, so a clamped pair still reads as far apart from
// everything on the other side.
const keyClamp = 48

func clampKey(x float64) float32 { return float32(min(max(x, -keyClamp), keyClamp)) }
