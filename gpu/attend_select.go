package gpu

import (
	"math"
	"math/rand/v2"
	"os"
)

// ScoreKernelEnv names the environment variable that forces the score
// kernel: go (the portable difference form), avx2, avx2fma, avx512bf16,
// or the Go twins of the dot forms, go-fmadot and go-bf16dot (slow: for
// accuracy checks on machines without the instructions). A name this
// machine cannot run, or none, leaves the default (chooseKernel).
const ScoreKernelEnv = "REGRESSD_SCORE_KERNEL"

// archKernel is the score kernel scores uses, chosen once at start.
var archKernel = chooseKernel(os.Getenv(ScoreKernelEnv), attendKernels())

// ScoreKernel names the score kernel this process runs.
func ScoreKernel() string { return archKernel.name }

// chooseKernel picks name among avail (and the dot forms' Go twins), else
// the default: the last of avail that is not a bf16 dot form. A bf16 dot
// form (avx512bf16) is opt-in: its assembly has not yet run on a CPU with
// AVX512-BF16 (none was at hand), so it is chosen only by name and only
// after it agrees with its Go twin on a small case (bf16DotSelfCheck); one
// that does not is dropped. Nothing runs it unless asked: a fault in
// untried assembly would stop the process, which no check can catch.
func chooseKernel(name string, avail []attendKernel) attendKernel {
	if name != "" {
		for _, k := range append(avail, bf16DotKernel, fmaDotKernel) {
			if k.name == name && (k.scoreBF16 == nil || bf16DotSelfCheck(k)) {
				return k
			}
		}
	}
	for i := len(avail) - 1; i > 0; i-- {
		if avail[i].scoreBF16 == nil {
			return avail[i]
		}
	}
	return avail[0]
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
