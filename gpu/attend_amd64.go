//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// avx2Kernel is the score kernel in AVX2 assembly (attend_amd64.s). It does
// the same float32 operations in the same order as portableKernel, lane by
// lane, with separate multiplies and adds (no FMA, which would round
// differently), so the two give the same bits.
var avx2Kernel = attendKernel{name: "avx2", flush: flushAVX2, widen: widenBF16AVX2, dequant: dequantInt8AVX2, score: scoreRowsAVX2}

// attendKernels lists the kernels this machine can run, portableKernel
// first, the fastest last (archKernel's default).
func attendKernels() []attendKernel {
	switch {
	case hasAVX512BF16 && hasAVX512:
		// avx512bf16 is opt-in (REGRESSD_SCORE_KERNEL): see chooseKernel.
		return []attendKernel{portableKernel, avx2FMAKernel, avx2Kernel, avx512Kernel, avx512BF16Kernel}
	case hasAVX512BF16:
		return []attendKernel{portableKernel, avx2FMAKernel, avx2Kernel, avx512BF16Kernel}
	case hasAVX512 && hasAVX2FMA:
		return []attendKernel{portableKernel, avx2FMAKernel, avx2Kernel, avx512Kernel}
	case hasAVX2FMA:
		// avx2fma before avx2: it is no faster here (the pass is bound by
		// reading the keys, not by arithmetic: docs/BENCHMARKS.md) and
		// rounds otherwise, so avx2 stays the default.
		return []attendKernel{portableKernel, avx2FMAKernel, avx2Kernel}
	case cpu.X86.HasAVX2:
		return []attendKernel{portableKernel, avx2Kernel}
	}
	return []attendKernel{portableKernel}
}

// flushAsm flushes n float32 (n a positive multiple of 8).
//
//go:noescape
func flushAsm(dst, src *float32, n int)

// widenBF16Asm widens n bf16 values (n a positive multiple of 8).
//
//go:noescape
func widenBF16Asm(dst *float32, src *uint16, n int)

// dequantInt8Asm dequantises groups runs of quadWidth int8 keys, one scale
// per run.
//
//go:noescape
func dequantInt8Asm(dst *float32, q *int8, scale *float32, groups int)

// scoreRows4Asm scores rows (a positive multiple of 4) rows of groups
// groups each against one query, writing the four heads' planes (n apart)
// from d2 on.
//
//go:noescape
func scoreRows4Asm(k, q, d2 *float32, rows, groups, n int)

func flushAVX2(dst, src []float32) {
	m := len(src) &^ (quadWidth - 1)
	if m > 0 {
		_ = dst[m-1]
		flushAsm(&dst[0], &src[0], m)
	}
	flushGo(dst[m:], src[m:])
}

func widenBF16AVX2(dst []float32, src []uint16) {
	m := len(src) &^ (quadWidth - 1)
	if m > 0 {
		_ = dst[m-1]
		widenBF16Asm(&dst[0], &src[0], m)
	}
	widenBF16Go(dst[m:], src[m:])
}

func dequantInt8AVX2(dst []float32, q []int8, scale []float32) {
	if len(scale) == 0 {
		return
	}
	m := len(scale) * quadWidth
	_, _ = dst[m-1], q[m-1]
	dequantInt8Asm(&dst[0], &q[0], &scale[0], len(scale))
}

func scoreRowsAVX2(k, q, d2 []float32, n, i0 int) {
	w := len(q)
	rows := len(k) / w
	r4 := rows &^ 3
	if r4 > 0 {
		// The assembly writes d2[h*n+i] for i in [i0, i0+r4); check the
		// extremes here, as the Go kernel's indexing would.
		if i0 < 0 || i0+r4 > n || w%quadWidth != 0 {
			panic("gpu: scoreRowsAVX2: rows out of range")
		}
		_ = d2[3*n+i0+r4-1]
		scoreRows4Asm(&k[0], &q[0], &d2[i0], r4, w/quadWidth, n)
	}
	scoreRowsGo(k[r4*w:rows*w], q, d2, n, i0+r4)
}
