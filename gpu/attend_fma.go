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
				for hh, v := range sumSquaresByHead(portableKernel.decodeKeys(s, qd, i, i+1, k, scale)) {
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
// difference form's loop (chunks of rows, a query, or two, at a time), with
// ‖q‖² per query and block and the rows' ‖k‖² beside the keys.
func (c *contextFit) scoresFMA(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := rv.s.rows, c.g, c.g*quadWidth // c.n, or a staged slice's rows
	s := rv.s
	kn := rv.fmaKeyNorms()
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw
	cb := min(nb, max(1, scoreChunkFloats/(anchorBlock*qw)))
	cw := cb * qw
	qs := make([]float32, len(qks)*cw)
	qn := make([]float32, len(qks)*cb*quadHeads)
	k := make([]float32, cb*anchorBlock*qw)
	scale := make([]float32, cb*anchorBlock*g)
	for qd := range quads {
		for lo := 0; lo < n; lo += cb * anchorBlock {
			hi := min(lo+cb*anchorBlock, n)
			kc := kern.decodeKeys(s, qd, lo, hi, k, scale)
			b0, b1 := lo/anchorBlock, (hi+anchorBlock-1)/anchorBlock
			for t, qk := range qks {
				kern.flush(qs[t*cw:t*cw+(b1-b0)*qw], qk[qd*pw+b0*qw:qd*pw+b1*qw])
				for b := range b1 - b0 {
					sq := sumSquaresByHead(qs[t*cw+b*qw : t*cw+(b+1)*qw])
					copy(qn[(t*cb+b)*quadHeads:], sq[:])
				}
			}
			qt := func(t, b int) []float32 { return qs[t*cw+b*qw:][:qw] }
			nt := func(t, b int) []float32 { return qn[(t*cb+b)*quadHeads:][:quadHeads] }
			kb := func(blo int) []float32 { return kc[(blo-lo)*qw : (min(blo+anchorBlock, hi)-lo)*qw] }
			t := 0
			if kern.scoreFMA2 != nil {
				for ; t+1 < len(qks); t += 2 {
					for blo := lo; blo < hi; blo += anchorBlock {
						b := (blo - lo) / anchorBlock
						kern.scoreFMA2(kb(blo), qt(t, b), qt(t+1, b), nt(t, b), nt(t+1, b), kn[qd],
							d2s[t][qd*quadHeads*n:], d2s[t+1][qd*quadHeads*n:], n, blo)
					}
				}
			}
			for ; t < len(qks); t++ {
				for blo := lo; blo < hi; blo += anchorBlock {
					b := (blo - lo) / anchorBlock
					kern.scoreFMA(kb(blo), qt(t, b), nt(t, b), kn[qd], d2s[t][qd*quadHeads*n:], n, blo)
				}
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
