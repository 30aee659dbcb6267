package gpu

import (
	"math"
	"math/rand/v2"
	"os"
)

// ScoreKernelEnv names the environment variable that forces the score
// kernel: go (the portable difference form), avx2, avx512, avx2fma, avx512bf16,
// or the Go twins of the dot forms, go-fmadot and go-bf16dot (slow: for
// accuracy checks on machines without the instructions). A name this
// machine cannot run, or none, leaves the default (chooseKernel).
const ScoreKernelEnv = "REGRESSD_SCORE_KERNEL"

// archKernel is the score kernel scores uses, chosen once at start.
var archKernel = chooseKernel(os.Getenv(ScoreKernelEnv), attendKernels())

// ScoreKernel names the score kernel this process runs.
func ScoreKernel() string { return archKernel.name }

// chooseKernel picks name among avail (and the dot forms' Go twins), else
// the default: the last of avail that is not a bf16 dot form and passes
// its self-check. A bf16 dot form (avx512bf16) is opt-in — it has run on a
// CPU with AVX512-BF16 and agreed with its twin, but is far slower than
// avx512 (docs/BENCHMARKS.md) — and is chosen only by name and only after
// it agrees with its Go twin on a small case (bf16DotSelfCheck); one that
// does not is dropped. A tiled kernel
// (avx512) is held to portableKernel's bits on a small case
// (tiledSelfCheck) before it is chosen, by name or by default.
func chooseKernel(name string, avail []attendKernel) attendKernel {
	ok := func(k attendKernel) bool {
		return (k.scoreBF16 == nil || bf16DotSelfCheck(k)) && (k.scoresTiled == nil || tiledSelfCheck(k))
	}
	if name != "" {
		for _, k := range append(avail, bf16DotKernel, fmaDotKernel) {
			if k.name == name && ok(k) {
				return k
			}
		}
	}
	for i := len(avail) - 1; i > 0; i-- {
		if avail[i].scoreBF16 == nil && ok(avail[i]) {
			return avail[i]
		}
	}
	return avail[0]
}

// tiledSelfCheck scores a small random case of each store type (37 rows:
// two anchor blocks, two whole tiles and a partial one; 4 groups, so the
// whole tiles take the in-register transposes and the last the gathers; 9
// queries: a group of eight and a padded one; keys and queries around
// flushTiny's threshold)
// with kern and portableKernel and reports whether every entry has the
// same bits.
func tiledSelfCheck(kern attendKernel) bool {
	r := rand.New(rand.NewPCG(16, 5))
	const n, g, nq = 37, 4, 9
	w := g * headWidth
	val := func() float32 {
		if r.IntN(8) == 0 {
			return float32(math.Ldexp(r.NormFloat64(), -40))
		}
		return float32(r.NormFloat64() * 3)
	}
	for _, dtype := range []string{CacheDTypeBF16, CacheDTypeInt8} {
		s := newLayerStore(dtype, n, g)
		k := make([]float32, w)
		for i := range n {
			for e := range k {
				k[e] = val()
			}
			s.putK(i, k)
		}
		nb := (n + anchorBlock - 1) / anchorBlock
		qks := make([][]float32, nq)
		want, got := make([][]float32, nq), make([][]float32, nq)
		for t := range qks {
			qks[t] = make([]float32, nb*w)
			for e := range qks[t] {
				qks[t][e] = val()
			}
			want[t], got[t] = make([]float32, n*headsPerLayer), make([]float32, n*headsPerLayer)
			for e := range got[t] {
				got[t][e] = float32(math.NaN())
			}
		}
		c := &contextFit{n: n, g: g}
		c.scoresWith(portableKernel, &rowView{s: s}, qks, want)
		c.scoresWith(kern, &rowView{s: s}, qks, got)
		for t := range want {
			for e := range want[t] {
				if math.Float32bits(got[t][e]) != math.Float32bits(want[t][e]) {
					return false
				}
			}
		}
	}
	return true
}

// bf16DotSelfCheck scores a small random bf16 case (g = 7 groups, one full
// run and a tail; 9 rows, past the 4-row unroll) with kern and the Go twin
// and reports whether every entry is within bf16DotTolerance.
func bf16DotSelfCheck(kern attendKernel) bool {
	r := rand.New(rand.NewPCG(16, 3))
	const g, rows = 7, 9
	w := g * quadWidth
	k, qhi, qlo := make([]uint16, rows*w), make([]uint16, w), make([]uint16, w)
	q := make([]float32, w)
	for e := range k {
		k[e] = toBF16(float32(r.NormFloat64() * 3))
	}
	for e := range q {
		q[e] = float32(r.NormFloat64() * 3)
	}
	bq := bf16Query{hi: qhi, lo: qlo, qn: make([]float32, quadHeads)}
	makeBF16Query(&bq, q, w)
	kn := bf16KeyNorms(k, w)
	want, got := make([]float32, quadHeads*rows), make([]float32, quadHeads*rows)
	scoreBF16Go(k, bq.hi, bq.lo, bq.qn, kn, want, rows, 0)
	kern.scoreBF16(k, bq.hi, bq.lo, bq.qn, kn, got, rows, 0)
	for i := range rows {
		for h := range quadHeads {
			tol := bf16DotTolerance(k[i*w:(i+1)*w], bq.hi, bq.lo, h)
			if d := math.Abs(float64(got[h*rows+i]) - float64(want[h*rows+i])); !(d <= tol) {
				return false
			}
		}
	}
	return true
}
