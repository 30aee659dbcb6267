//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// hasAVX512BF16: this CPU and OS run the AVX512-BF16 kernel (512-bit
// registers enabled by the OS, AVX512F and AVX512-BF16; AVX2 for the int8
// stores).
var hasAVX512BF16 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16

// avx512BF16Kernel scores bf16 stores in the dot form with VDPBF16PS
// (attend_bf16dot_amd64.s), int8 stores as avx2Kernel does.
var avx512BF16Kernel = func() attendKernel {
	k := avx2Kernel
	k.name, k.scoreBF16 = "avx512bf16", scoreBF16AVX512
	return k
}()

// scoreBF16Rows4Asm is scoreBF16Go on rows (a positive multiple of 4)
// rows, stride bytes apart, of chunks full runs of 32 bf16 and a masked
// run of the groups left (tail: its dword mask, 0 if none).
//
//go:noescape
func scoreBF16Rows4Asm(k, qhi, qlo *uint16, qn, kn, d2 *float32, rows, stride, chunks, tail, n int)

func scoreBF16AVX512(k, qhi, qlo []uint16, qn, kn, d2 []float32, n, i0 int) {
	w := len(qhi)
	rows := len(k) / w
	r4 := rows &^ 3
	if r4 > 0 {
		// The assembly reads rows·w keys, w of each query half, 4 of qn
		// and 4 of kn a row, and writes d2[h*n+i] for i in [i0, i0+r4);
		// check the extremes here, as the Go twin's indexing would.
		if i0 < 0 || i0+r4 > n || w%quadWidth != 0 || len(qlo) < w || len(qn) < quadHeads {
			panic("gpu: scoreBF16AVX512: rows out of range")
		}
		_, _ = k[r4*w-1], kn[r4*quadHeads-1]
		_ = d2[3*n+i0+r4-1]
		g := w / quadWidth
		tail := (1 << (4 * (g % 4))) - 1 // 4 dwords (one group) a bit each
		scoreBF16Rows4Asm(&k[0], &qhi[0], &qlo[0], &qn[0], &kn[0], &d2[i0], r4, 2*w, g/4, tail, n)
	}
	if r4 < rows {
		scoreBF16Go(k[r4*w:rows*w], qhi, qlo, qn, kn[r4*quadHeads:], d2, n, i0+r4)
	}
}
