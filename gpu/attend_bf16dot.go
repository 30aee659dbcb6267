package gpu

import (
	"math"
	"sync"
)

// The bf16 dot-product form of the score pass. A squared distance is
// ‖q‖² + ‖k‖² − 2 q·k, so a bf16 store's keys can be scored as stored,
// by bf16 dot products (AVX512-BF16's VDPBF16PS: bf16 pairs multiplied
// exactly, summed in float32), with no widening of the keys per tile. The
// query is held as two bf16 halves, hi = bf16(q) and lo = bf16(q − hi),
// which carry about 16 of its 24 bits, so the query loses almost nothing to
// the format; ‖q‖² and ‖k‖² are of the very values the products see (hi+lo
// and the stored keys), summed in float64, so d2 is ‖(hi+lo) − k‖² but for
// float32 rounding of the dot product and of the final sum (bf16DotTolerance
// states the bound). It is not bit-identical to the difference
// form (attend.go): its error grows with ‖q‖² + ‖k‖², where the difference
// form's grows with d2, and a d2 below zero from that rounding is read as 0.

// bf16Query is one query's key slices for one quad, per anchor block, in
// the dot form: hi and lo halves (nb·qw each) and ‖hi+lo‖² per block and
// quad head (nb·quadHeads).
type bf16Query struct {
	hi, lo []uint16
	qn     []float32
}

// dazBF16 is the float32 value VDPBF16PS reads from a bf16: subnormals
// (exponent 0) as 0, as its DAZ does.
func dazBF16(b uint16) float32 {
	if b&0x7f80 == 0 {
		return 0
	}
	return fromBF16(b)
}

// ftz32 is x with subnormal results flushed to 0, as VDPBF16PS's FTZ does.
func ftz32(x float32) float32 {
	if math.Float32bits(x)&0x7f800000 == 0 {
		return 0
	}
	return x
}

// makeBF16Query fills q from a query's float32 slices for one quad (nb
// blocks of qw), flushing tiny coordinates as the difference form does.
func makeBF16Query(q *bf16Query, src []float32, qw int) {
	q.hi, q.lo = q.hi[:len(src)], q.lo[:len(src)]
	for e, x := range src {
		x = flushTiny(x)
		h := toBF16(x)
		q.hi[e] = h
		q.lo[e] = toBF16(x - fromBF16(h))
	}
	nb := len(src) / qw
	q.qn = q.qn[:nb*quadHeads]
	for b := range nb {
		for hh := range quadHeads {
			var s float64
			for e := b*qw + 2*hh; e < (b+1)*qw; e += quadWidth {
				for c := range 2 {
					v := float64(dazBF16(q.hi[e+c])) + float64(dazBF16(q.lo[e+c]))
					s += v * v
				}
			}
			q.qn[b*quadHeads+hh] = float32(s)
		}
	}
}

// keyNorms returns ‖k‖² of every row of a bf16 store, per quad: kn[qd][i·
// quadHeads+hh], summed in float64 from the keys as VDPBF16PS reads them.
// Made once per rowView, on first use.
func (rv *rowView) keyNorms() *[quads][]float32 {
	rv.knOnce.Do(func() {
		s := rv.s
		qw := s.groups * quadWidth
		for qd := range quads {
			base := s.quadRun(qd, 0)
			rv.kn[qd] = bf16KeyNorms(s.kb[base:base+s.rows*qw], qw)
		}
	})
	return &rv.kn
}

// bf16DotState is what rowView keeps for the dot form.
type bf16DotState struct {
	knOnce sync.Once
	kn     [quads][]float32
}

// scoresBF16Dot is scoresWith for a bf16 store on a kernel with a dot form:
// per quad, each query of the tile is split into bf16 halves once, then
// every anchor block's keys are scored as stored.
func (c *contextFit) scoresBF16Dot(kern attendKernel, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, qw := c.n, c.g*quadWidth
	s := rv.s
	kn := rv.keyNorms()
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw
	qs := make([]bf16Query, len(qks))
	for t := range qs {
		qs[t] = bf16Query{hi: make([]uint16, pw), lo: make([]uint16, pw), qn: make([]float32, nb*quadHeads)}
	}
	for qd := range quads {
		for t, qk := range qks {
			makeBF16Query(&qs[t], qk[qd*pw:(qd+1)*pw], qw)
		}
		for lo := 0; lo < n; lo += anchorBlock {
			hi := min(lo+anchorBlock, n)
			at := s.quadRun(qd, lo)
			kb := s.kb[at : at+(hi-lo)*qw]
			b := lo / anchorBlock
			knb := kn[qd][lo*quadHeads : hi*quadHeads]
			for t := range qks {
				q := &qs[t]
				kern.scoreBF16(kb, q.hi[b*qw:(b+1)*qw], q.lo[b*qw:(b+1)*qw], q.qn[b*quadHeads:(b+1)*quadHeads], knb,
					d2s[t][qd*quadHeads*n:], n, lo)
			}
		}
	}
}

// dotLanes is the number of float32 lanes of one VDPBF16PS on 512 bits:
// 32 bf16, four groups of a quad's row.
const dotLanes = 16

// scoreBF16Go is the Go twin of the VDPBF16PS kernel: for rows i0, i0+1, …
// of bf16 keys k (row-major, len(qhi) each), d2[h*n+i] = max(0, (qn[h] +
// kn[r·4+h]) − 2·q·k), with q·k summed as the assembly sums it. Lane l of a
// 512-bit accumulator takes the pair of coordinates 2l, 2l+1 of each run of
// four groups (group l/4, quad head l%4), adding the odd product then the
// even one, each rounded to float32 (Intel's definition of VDPBF16PS), with
// bf16 subnormals read as 0 and subnormal results flushed; hi and lo have an
// accumulator each. A row's sum is then (hi+lo) lane by lane, lanes l and
// l+8 added, then those of l and l+4.
func scoreBF16Go(k, qhi, qlo []uint16, qn, kn, d2 []float32, n, i0 int) {
	w := len(qhi)
	qlo = qlo[:w]
	for r := range len(k) / w {
		kr := k[r*w : (r+1)*w]
		var ahi, alo [dotLanes]float32
		for c := 0; c < w; c += 2 * dotLanes {
			for l := range dotLanes {
				e := c + 2*l
				if e >= w { // the assembly's masked tail loads zeros
					break
				}
				k1, k0 := dazBF16(kr[e+1]), dazBF16(kr[e])
				ahi[l] = ftz32(ahi[l] + ftz32(dazBF16(qhi[e+1])*k1))
				ahi[l] = ftz32(ahi[l] + ftz32(dazBF16(qhi[e])*k0))
				alo[l] = ftz32(alo[l] + ftz32(dazBF16(qlo[e+1])*k1))
				alo[l] = ftz32(alo[l] + ftz32(dazBF16(qlo[e])*k0))
			}
		}
		var a [dotLanes]float32
		for l := range a {
			a[l] = ahi[l] + alo[l]
		}
		i := i0 + r
		for h := range quadHeads {
			dot := (a[h] + a[h+8]) + (a[h+4] + a[h+12])
			d := (qn[h] + kn[r*quadHeads+h]) - (dot + dot)
			if d < 0 {
				d = 0
			}
			d2[h*n+i] = d
		}
	}
}

// bf16KeyNorms is ‖k‖² per row and quad head of rows of w bf16 keys, as
// rowView.keyNorms computes them.
func bf16KeyNorms(k []uint16, w int) []float32 {
	kn := make([]float32, len(k)/w*quadHeads)
	for i := range len(k) / w {
		row := k[i*w : (i+1)*w]
		for hh := range quadHeads {
			var sum float64
			for e := 2 * hh; e < w; e += quadWidth {
				a, b := float64(dazBF16(row[e])), float64(dazBF16(row[e+1]))
				sum += a*a + b*b
			}
			kn[i*quadHeads+hh] = float32(sum)
		}
	}
	return kn
}

// bf16DotTolerance bounds |Δd2| for head h of one row between two
// summation orders of the dot form (the twin's and any hardware's): S =
// ‖q‖² + ‖k‖² + 2Σ|q_e k_e| over the head's coordinates (hi and lo
// products apart) bounds every partial sum's magnitude, and each of the at
// most m = 4·groups + 8 roundings adds at most 2⁻²⁴ of it; twice that
// covers both sides' rounding.
func bf16DotTolerance(k, qhi, qlo []uint16, h int) float64 {
	var qn, kn, cross float64
	m := 8
	for e := 2 * h; e < len(k); e += quadWidth {
		m += 4
		for c := range 2 {
			hi, lo, kv := float64(dazBF16(qhi[e+c])), float64(dazBF16(qlo[e+c])), float64(dazBF16(k[e+c]))
			qn += (hi + lo) * (hi + lo)
			kn += kv * kv
			cross += math.Abs(hi*kv) + math.Abs(lo*kv)
		}
	}
	return 2 * float64(m) * 0x1p-24 * (qn + kn + 2*cross)
}
