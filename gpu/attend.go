package gpu

import (
	"math"
	"sort"
)

// layerReader gives the forward pass one layer's keys and values: from a
// resident cache, streamed from the host tier, or computed afresh. done
// releases whatever device memory the layer took.
type layerReader func(l int) (s *layerStore, done func(), err error)

// rowView is one layer's keys plus the per-row value and count channel of
// every head, averaged over the groups' copies.
type rowView struct {
	s    *layerStore
	vbar []float32 // n×H
	cbar []float32 // n×H
}

func newRowView(s *layerStore) *rowView {
	n, w := s.rows, s.groups*headWidth
	rv := &rowView{s: s, vbar: make([]float32, n*headsPerLayer), cbar: make([]float32, n*headsPerLayer)}
	parallelFor(n, 1024, func(lo, hi int) {
		v := make([]float32, w)
		inv := 1 / float32(s.groups)
		for i := lo; i < hi; i++ {
			s.getV(i, v)
			for h := range headsPerLayer {
				var vs, cs float32
				for g := range s.groups {
					vs += v[g*headWidth+2*h]
					cs += v[g*headWidth+2*h+1]
				}
				rv.vbar[i*headsPerLayer+h] = vs * inv
				rv.cbar[i*headsPerLayer+h] = cs * inv
			}
		}
	})
	return rv
}

// scoreTile is the number of queries scored together in one pass over the
// rows, so each key row is decoded once per tile rather than per query.
const scoreTile = 4

// scores writes, for each query t of the tile, d2s[t][h*n+i]: head h's
// squared distance from the query (its key slices qks[t], per anchor block)
// to row i. Each query's sums run in the same order whatever the tile, so
// the bits do not depend on how queries are grouped.
func (c *contextFit) scores(rv *rowView, qks [][]float32, d2s [][]float32) {
	n, w := c.n, c.g*headWidth
	k := make([]float32, w)
	s := rv.s
	for i := range n {
		if s.dtype == CacheDTypeInt8 {
			s.getK(i, k)
		} else {
			row := s.kb[i*w : (i+1)*w]
			for e, b := range row {
				k[e] = fromBF16(b)
			}
		}
		off := (i / anchorBlock) * w
		for t, qk := range qks {
			q := qk[off : off+w]
			var a0, a1, a2, a3 float32
			for g := 0; g < w; g += headWidth {
				kg, qg := k[g:g+headWidth:g+headWidth], q[g:g+headWidth:g+headWidth]
				d0, d1 := qg[0]-kg[0], qg[1]-kg[1]
				a0 += d0*d0 + d1*d1
				d0, d1 = qg[2]-kg[2], qg[3]-kg[3]
				a1 += d0*d0 + d1*d1
				d0, d1 = qg[4]-kg[4], qg[5]-kg[5]
				a2 += d0*d0 + d1*d1
				d0, d1 = qg[6]-kg[6], qg[7]-kg[7]
				a3 += d0*d0 + d1*d1
			}
			d2 := d2s[t]
			d2[i], d2[n+i], d2[2*n+i], d2[3*n+i] = a0, a1, a2, a3
		}
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
			den += w * float64(rv.cbar[i*headsPerLayer+h])
		}
		if den == 0 {
			return 0
		}
		return num / den * rv.s.vScale[h]
	default: // kindTopK
		k := topK(d2, min(hd.spec.k, n), idx)
		var num, den float64
		for _, i := range k {
			num += float64(rv.vbar[i*headsPerLayer+h])
			den += float64(rv.cbar[i*headsPerLayer+h])
		}
		if den == 0 {
			return 0
		}
		return num / den * rv.s.vScale[h]
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
// each layer from read. scratch must hold nq·n·H float32 (the batch's score
// matrix). Queries are spread over the cores in fixed pieces; each query is
// computed start to end by one goroutine, so the bits never depend on
// GOMAXPROCS.
func (c *contextFit) forward(zq []float64, nq int, read layerReader, scratch []float32) ([]float64, error) {
	out := make([]float64, nq)
	if c.constant {
		for q := range out {
			out[q] = c.pp.yMean
		}
		return out, nil
	}
	f, n := c.f, c.n
	var buf []float64
	for q := range nq {
		out[q] = c.trendW * c.tr.eval(zq[q*f:(q+1)*f], buf)
	}
	nb := len(c.anchors) / f
	w := c.g * headWidth
	for l := range c.layers {
		s, done, err := read(l)
		if err != nil {
			return nil, err
		}
		rv := newRowView(s)
		parallelFor(nq, scoreTile, func(lo, hi int) {
			qks := make([][]float32, hi-lo)
			d2s := make([][]float32, hi-lo)
			for t := range qks {
				q := lo + t
				qks[t] = make([]float32, nb*w)
				c.queryKeys(l, zq[q*f:(q+1)*f], qks[t])
				d2s[t] = scratch[q*n*headsPerLayer : (q+1)*n*headsPerLayer]
			}
			c.scores(rv, qks, d2s)
			sel := make([]float32, n)
			idx := make([]int, 0, 64)
			for t := range qks {
				q := lo + t
				for h := range c.layers[l] {
					hd := &c.layers[l][h]
					if hd.w == 0 {
						continue
					}
					out[q] += hd.w * c.headReduce(hd, h, rv, d2s[t][h*n:(h+1)*n], sel, idx)
				}
			}
		})
		done()
	}
	for q := range out {
		out[q] = out[q]*c.pp.yScale + c.pp.yMean
	}
	return out, nil
}
