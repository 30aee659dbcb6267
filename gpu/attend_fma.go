package gpu

import (
	"math"
	"sync"
)

// The float32 dot form of the score pass (the dot form of
// attend_bf16dot.go with float32 queries and the keys decoded as the
// difference form decodes them): d2 = max(0, ‖q‖² + ‖k‖² − 2 q·k), q·k
// by fused multiply-adds, one per coordinate, where the difference form
// spends a subtract, a multiply and an add. ‖q‖² and ‖k‖² are of the
// flushed query and the decoded, flushed keys, summed in float64; the
// error is float32 rounding of the dot product and the final sum, bounded
// by fmaDotTolerance, and grows with ‖q‖² + ‖k‖² where the difference
// form's grows with d2.

// fmaDotState is what rowView keeps for the float32 dot form: ‖k‖² of
// every row, per quad, laid out as the score planes are (kn[qd][hh·n+i]).
type fmaDotState struct {
	fmaOnce sync.Once
	fmaKn   [quads][]float32
}

// fmaKeyNorms returns ‖k‖² per quad, head plane and row, from the keys as
// the portable kernel decodes them (which every kernel matches to the bit).
func (rv *rowView) fmaKeyNorms() *[quads][]float32 {
	rv.fmaOnce.Do(func() {
		s := rv.s
		n, g, qw := s.rows, s.groups, s.groups*quadWidth
		k := make([]float32, qw)
		scale := make([]float32, g)
		for qd := range quads {
			kn := make([]float32, quadHeads*n)
			for i := range n {
				at := s.quadRun(qd, i)
				if s.dtype == CacheDTypeInt8 {
					for j, code := range s.ks[i*g : (i+1)*g] {
						scale[j] = int8Scale[code]
					}
					dequantInt8Go(k, s.kq[at:at+qw], scale)
				} else {
					widenBF16Go(k, s.kb[at:at+qw])
				}
				for hh, v := range sumSquaresByHead(k) {
					kn[hh*n+i] = v
				}
			}
			rv.fmaKn[qd] = kn
		}
	})
	return &rv.fmaKn
}

// sumSquaresByHead is Σ x² per quad head of a quad's run of groups, in
// float64, rounded to float32.
func sumSquaresByHead(x []float32) (s [quadHeads]float32) {
	for hh := range quadHeads {
		var sum float64
		for e := 2 * hh; e < len(x); e += quadWidth {
			a, b := float64(x[e]), float64(x[e+1])
			sum += a*a + b*b
		}
		s[hh] = float32(sum)
	}
	return s
}

// scoresFMA is scoresWith on a kernel with the float32 dot form: the
// difference form's loop, with ‖q‖² per query and block and the rows'
// ‖k‖² beside the keys.
func (c *contextFit) scoresFMA(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := c.n, c.g, c.g*quadWidth
	s := rv.s
	kn := rv.fmaKeyNorms()
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw
	qs := make([]float32, len(qks)*pw)
	qn := make([]float32, len(qks)*nb*quadHeads)
	k := make([]float32, anchorBlock*qw)
	scale := make([]float32, anchorBlock*g)
	for qd := range quads {
		for t, qk := range qks {
			kern.flush(qs[t*pw:(t+1)*pw], qk[qd*pw:(qd+1)*pw])
			for b := range nb {
				sq := sumSquaresByHead(qs[t*pw+b*qw : t*pw+(b+1)*qw])
				copy(qn[(t*nb+b)*quadHeads:], sq[:])
			}
		}
		for lo := 0; lo < n; lo += anchorBlock {
			hi := min(lo+anchorBlock, n)
			kb, at := k[:(hi-lo)*qw], s.quadRun(qd, lo)
			if s.dtype == CacheDTypeInt8 {
				for j, code := range s.ks[lo*g : hi*g] {
					scale[j] = int8Scale[code]
				}
				kern.dequant(kb, s.kq[at:at+len(kb)], scale[:(hi-lo)*g])
			} else {
				kern.widen(kb, s.kb[at:at+len(kb)])
			}
			b := lo / anchorBlock
			qt := func(t int) []float32 { return qs[t*pw+b*qw:][:qw] }
			nt := func(t int) []float32 { return qn[(t*nb+b)*quadHeads:][:quadHeads] }
			t := 0
			if kern.scoreFMA2 != nil {
				for ; t+1 < len(qks); t += 2 {
					kern.scoreFMA2(kb, qt(t), qt(t+1), nt(t), nt(t+1), kn[qd],
						d2s[t][qd*quadHeads*n:], d2s[t+1][qd*quadHeads*n:], n, lo)
				}
			}
			for ; t < len(qks); t++ {
				kern.scoreFMA(kb, qt(t), nt(t), kn[qd], d2s[t][qd*quadHeads*n:], n, lo)
			}
		}
	}
}

// fma32 is float32 a·b + c rounded once, as VFMADD231PS does (the float64
// FMA is exact in the product; its one rounding before float32's can differ
// from a single rounding only on a float32 tie, which the tests' bound
// covers).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// scoreFMAGo is the Go twin of the AVX2 FMA kernel: for rows i0, i0+1, …
// of float32 keys k (row-major, len(q) each), d2[h*n+i] = max(0, (qn[h] +
// kn[h*n+i]) − 2·q·k), q·k summed lane by lane over the groups (lane e of a
// group, fused multiply-add), then each head's two lanes added.
func scoreFMAGo(k, q, qn, kn, d2 []float32, n, i0 int) {
	w := len(q)
	for r := range len(k) / w {
		kr := k[r*w : (r+1)*w]
		var a [quadWidth]float32
		for g := 0; g < w; g += quadWidth {
			for e := range quadWidth {
				a[e] = fma32(q[g+e], kr[g+e], a[e])
			}
		}
		i := i0 + r
		for h := range quadHeads {
			dot := a[2*h] + a[2*h+1]
			d := (qn[h] + kn[h*n+i]) - (dot + dot)
			if d < 0 {
				d = 0
			}
			d2[h*n+i] = d
		}
	}
}

// fmaDotTolerance bounds |Δd2| for quad head h of one row between two
// summation orders of the float32 dot form, as bf16DotTolerance does:
// m = groups + 8 roundings, each at most 2⁻²⁴ of S = ‖q‖² + ‖k‖² +
// 2Σ|q_e k_e|, twice for two sides.
func fmaDotTolerance(k, q []float32, h int) float64 {
	var qn, kn, cross float64
	m := 8
	for e := 2 * h; e < len(k); e += quadWidth {
		m++
		for c := range 2 {
			qv, kv := float64(flushTiny(q[e+c])), float64(k[e+c])
			qn += qv * qv
			kn += kv * kv
			cross += math.Abs(qv * kv)
		}
	}
	return 2 * float64(m) * 0x1p-24 * (qn + kn + 2*cross)
}
