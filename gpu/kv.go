package gpu

import (
	"fmt"
	"math"
)

// The KV cache. For every layer l, feature group g (features 2g and 2g+1)
// and context row i it holds a key vector and a value vector of width E =
// headWidth, as the memory policy's size estimate assumes:
//
//	key[l][i][g][2h+c]   = (z[i][2g+c] − anchor[block(i)][2g+c]) / ℓ_h[2g+c]
//	value[l][i][g][2h+0] = v_h[i] / vScale_h
//	value[l][i][g][2h+1] = 1 (a count channel)
//
// for head h of the layer and c ∈ {0, 1} (the missing half of an odd last
// pair is 0). A query's squared distance to row i for head h is the sum over
// groups of its 2-wide key slices, so every group's key is read by every
// head. The value is the head's value for the row (the GP solve α for solve
// heads, the target for the others); every group's cell carries it, like the
// per-cell values of the layout the policy talks about, and the kernel
// averages the groups' copies. Storage is bf16 or int8 with one float32
// absmax scale per row, group and K or V vector.
//
// Solve heads are unnormalised and need no count channel, while their solved
// values cancel one another, so they spend that channel on a second digit of
// the value: bf16 keeps hi = bf16(v) and lo = bf16(v − hi); int8 keeps
// hi = round(v/s) and lo = round((v/s − hi)·127) under the vector's scale s.

// layerStore is one layer's keys and values for rows [0, rows).
type layerStore struct {
	layer  int
	vScale [headsPerLayer]float64 // values are stored as v/vScale, |v/vScale| ≤ 1
	paired [headsPerLayer]bool    // solve heads: the value pair is (hi, lo)
	dtype  string
	rows   int
	groups int
	kb, vb []uint16 // bf16
	kq, vq []int8   // int8
	ks, vs []float32
}

// bytesPerRowLayer is the cache size of one row in one layer.
func bytesPerRowLayer(groups int, dtype string) int64 {
	if dtype == CacheDTypeInt8 {
		return int64(groups) * 2 * (headWidth + 4)
	}
	return int64(groups) * 2 * headWidth * 2
}

func newLayerStore(dtype string, rows, groups int, paired [headsPerLayer]bool) *layerStore {
	s := &layerStore{dtype: dtype, rows: rows, groups: groups, paired: paired}
	n := rows * groups * headWidth
	if dtype == CacheDTypeInt8 {
		s.kq, s.vq = make([]int8, n), make([]int8, n)
		s.ks, s.vs = make([]float32, rows*groups), make([]float32, rows*groups)
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
	c.ks, c.vs = append([]float32(nil), s.ks...), append([]float32(nil), s.vs...)
	return &c
}

// putK stores row i's float32 key vectors (groups×E).
func (s *layerStore) putK(i int, k []float32) {
	w := s.groups * headWidth
	if s.dtype == CacheDTypeInt8 {
		for g := range s.groups {
			o := i*w + g*headWidth
			s.ks[i*s.groups+g] = quantInt8(k[g*headWidth:(g+1)*headWidth], s.kq[o:o+headWidth])
		}
		return
	}
	for e := range w {
		s.kb[i*w+e] = toBF16(k[e])
	}
}

// putV stores row i's float32 value vectors; for paired heads the second
// channel is ignored and rewritten as the low digit.
func (s *layerStore) putV(i int, v []float32) {
	w := s.groups * headWidth
	if s.dtype == CacheDTypeInt8 {
		for g := range s.groups {
			o := i*w + g*headWidth
			vg := v[g*headWidth : (g+1)*headWidth]
			for h, p := range s.paired {
				if p {
					vg[2*h+1] = 0
				}
			}
			sc := quantInt8(vg, s.vq[o:o+headWidth])
			s.vs[i*s.groups+g] = sc
			for h, p := range s.paired {
				if p && sc > 0 {
					x := vg[2*h] / sc
					hi := float32(math.RoundToEven(float64(x)))
					lo := float32(math.RoundToEven(float64((x - hi) * 127)))
					s.vq[o+2*h] = int8(hi)
					s.vq[o+2*h+1] = int8(min(max(lo, -127), 127))
				}
			}
		}
		return
	}
	for e := range w {
		s.vb[i*w+e] = toBF16(v[e])
	}
	for g := range s.groups {
		for h, p := range s.paired {
			if p {
				o := i*w + g*headWidth + 2*h
				s.vb[o+1] = toBF16(v[g*headWidth+2*h] - fromBF16(s.vb[o]))
			}
		}
	}
}

// getK writes row i's dequantised key vectors into k.
func (s *layerStore) getK(i int, k []float32) { s.decodeRow(i, s.kq, s.ks, s.kb, k) }

// getV writes row i's dequantised value vectors into v; for paired heads the
// value channel holds hi+lo and the second channel 1.
func (s *layerStore) getV(i int, v []float32) {
	s.decodeRow(i, s.vq, s.vs, s.vb, v)
	w := s.groups * headWidth
	for g := range s.groups {
		for h, p := range s.paired {
			if !p {
				continue
			}
			o := g*headWidth + 2*h
			if s.dtype == CacheDTypeInt8 {
				q := s.vq[i*w+o:]
				v[o] = (float32(q[0]) + float32(q[1])/127) * s.vs[i*s.groups+g]
			} else {
				v[o] += v[o+1]
			}
			v[o+1] = 1
		}
	}
}

// decodeRow writes row i of one side of the store — int8 codes q with
// their per-group scales sc, or bf16 b — as float32 into dst.
func (s *layerStore) decodeRow(i int, q []int8, sc []float32, b []uint16, dst []float32) {
	w := s.groups * headWidth
	if s.dtype == CacheDTypeInt8 {
		for g := range s.groups {
			o := i*w + g*headWidth
			scale := sc[i*s.groups+g]
			for e := range headWidth {
				dst[g*headWidth+e] = float32(q[o+e]) * scale
			}
		}
		return
	}
	for e := range w {
		dst[e] = fromBF16(b[i*w+e])
	}
}

// buildLayer computes layer l's keys and values for every row into a new
// store of the given precision. Keys are stored first; the solve heads'
// values are then solved on the keys as stored (positions rebuilt from the
// rounded keys and their anchors), so each solve head is an exact GP on the
// inputs the queries will see and the solve does not amplify rounding. The
// solve is where context rows attend to context rows; its workspace is
// reserved on dev, in experts of at most chunk rows.
func (c *contextFit) buildLayer(l int, dev *Device, chunk int, dtype string) (*layerStore, error) {
	var paired [headsPerLayer]bool
	for h := range c.layers[l] {
		paired[h] = c.layers[l][h].spec.kind == kindSolve
	}
	s := newLayerStore(dtype, c.n, c.g, paired)
	s.layer = l
	w := c.g * headWidth
	parallelFor(c.n, 256, func(lo, hi int) {
		k := make([]float32, w)
		for i := lo; i < hi; i++ {
			c.rowKeys(l, i, k)
			s.putK(i, k)
		}
	})
	var vals [headsPerLayer][]float64
	for h := range c.layers[l] {
		hd := &c.layers[l][h]
		vals[h] = c.ys
		if hd.spec.kind == kindSolve {
			a, err := c.solveStored(s, h, hd, dev, chunk)
			if err != nil {
				return nil, err
			}
			vals[h] = a
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
	parallelFor(c.n, 256, func(lo, hi int) {
		v := make([]float32, w)
		for i := lo; i < hi; i++ {
			c.rowValues(s, vals, i, v)
			s.putV(i, v)
		}
	})
	return s, nil
}

// solveStored solves head h's GP on the positions its stored keys encode.
func (c *contextFit) solveStored(s *layerStore, h int, hd *head, dev *Device, chunk int) ([]float64, error) {
	n, f := c.n, c.f
	m := n
	if chunk > 0 && n > chunk {
		nc := (n + chunk - 1) / chunk
		m = (n + nc - 1) / nc
	}
	// One expert's kernel matrix (factored in place), the positions and a
	// few vectors.
	res, err := dev.reserve(int64(m)*int64(m)*8+int64(n)*int64(f+4)*8, fmt.Sprintf("solve workspace for %d rows", m))
	if err != nil {
		return nil, err
	}
	defer res.release()
	pos := make([]float64, n*f)
	w := c.g * headWidth
	// Squared rounding error of the stored keys, summed per piece of rows
	// so the total does not depend on scheduling.
	const piece = 256
	sq := make([]float64, (n+piece-1)/piece)
	parallelFor(n, piece, func(lo, hi int) {
		k, exact := make([]float32, w), make([]float32, w)
		for i := lo; i < hi; i++ {
			s.getK(i, k)
			c.rowKeys(s.layer, i, exact)
			a := c.anchors[(i/anchorBlock)*f : (i/anchorBlock+1)*f]
			for d := range f {
				e := (d/2)*headWidth + 2*h + d%2
				pos[i*f+d] = a[d]*hd.inv[d] + float64(k[e])
				sq[lo/piece] += float64(k[e]-exact[e]) * float64(k[e]-exact[e])
			}
		}
	})
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
	if s.dtype == CacheDTypeInt8 {
		// Two int8 digits hold a value to about 1/127² of its vector's
		// scale, far less than a nearly noiseless solve's cancellation
		// needs; a noise floor bounds that cancellation. This is where
		// int8 trades accuracy.
		sn2 = max(sn2, int8NoiseFloor*hp.sf2)
	}
	return fitSolve(pos, n, f, ones, hp.sf2, sn2, c.ys, chunk, make([]bool, n)).alpha, nil
}

// rowKeys writes row i's float32 key vectors for layer l.
func (c *contextFit) rowKeys(l, i int, k []float32) {
	f := c.f
	c.keysAt(l, c.z[i*f:(i+1)*f], c.anchors[(i/anchorBlock)*f:(i/anchorBlock+1)*f], k)
}

// keysAt writes the key vectors (groups × E) of the point x relative to the
// anchor a for layer l: the one formula for context rows and queries.
func (c *contextFit) keysAt(l int, x, a []float64, k []float32) {
	f := c.f
	for g := range c.g {
		for h := range c.layers[l] {
			hd := &c.layers[l][h]
			for cc := range 2 {
				d := 2*g + cc
				var v float32
				if d < f {
					v = clampKey((x[d] - a[d]) * hd.inv[d])
				}
				k[g*headWidth+2*h+cc] = v
			}
		}
	}
}

// rowValues writes row i's float32 value vectors for the store's layer.
func (c *contextFit) rowValues(s *layerStore, vals [headsPerLayer][]float64, i int, v []float32) {
	for g := range c.g {
		for h := range headsPerLayer {
			v[g*headWidth+2*h] = float32(vals[h][i] / s.vScale[h])
			v[g*headWidth+2*h+1] = 1
		}
	}
}

// queryKeys writes the query's key slices relative to every anchor block:
// qk[b][g][2h+c], the same formula as the context keys.
func (c *contextFit) queryKeys(l int, x []float64, qk []float32) {
	f := c.f
	w := c.g * headWidth
	for b := range len(c.anchors) / f {
		c.keysAt(l, x, c.anchors[b*f:(b+1)*f], qk[b*w:(b+1)*w])
	}
}

// int8NoiseFloor is the least noise variance, as a share of the signal
// variance, of a GP solved for an int8 cache.
const int8NoiseFloor = 0.01

// keyClamp bounds key coordinates, in length scales from the block anchor.
// Past a few length scales a coordinate only says "far" (the kernels are
// e^−½d² and the top-k heads rank far rows last anyway), and a binary
// column with a tiny fitted length scale would otherwise set the int8 scale
// of the whole vector and wash out every other head's coordinates. Queries
// are clamped the same way, so a clamped pair still reads as far apart from
// everything on the other side.
const keyClamp = 48

func clampKey(x float64) float32 { return float32(min(max(x, -keyClamp), keyClamp)) }
