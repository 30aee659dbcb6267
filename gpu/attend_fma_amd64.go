//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// hasAVX2FMA: this CPU runs the AVX2 FMA kernel.
var hasAVX2FMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// avx2FMAKernel scores both stores in the float32 dot form
// (attend_fma_amd64.s), decoding keys as avx2Kernel does.
var avx2FMAKernel = func() attendKernel {
	k := avx2Kernel
	k.name, k.scoreFMA, k.scoreFMA2 = "avx2fma", scoreFMAAVX2, scoreFMA2AVX2
	return k
}()

// scoreFMARows4Asm is scoreFMAGo on rows (a positive multiple of 4) rows
// of groups groups, with qnv the heads' ‖q‖² laid out as its comment says.
//
//go:noescape
func scoreFMARows4Asm(k, q, qnv, kn, d2 *float32, rows, groups, n int)

func scoreFMAAVX2(k, q, qn, kn, d2 []float32, n, i0 int) {
	w := len(q)
	rows := len(k) / w
	r4 := rows &^ 3
	if r4 > 0 {
		// The assembly reads kn and writes d2 at [h*n+i] for i in
		// [i0, i0+r4); check the extremes here, as the twin's indexing would.
		if i0 < 0 || i0+r4 > n || w%quadWidth != 0 || len(qn) < quadHeads {
			panic("gpu: scoreFMAAVX2: rows out of range")
		}
		_, _ = d2[3*n+i0+r4-1], kn[3*n+i0+r4-1]
		var qnv [16]float32
		qnLanes(qnv[:], qn)
		scoreFMARows4Asm(&k[0], &q[0], &qnv[0], &kn[i0], &d2[i0], r4, w/quadWidth, n)
	}
	if r4 < rows {
		scoreFMAGo(k[r4*w:rows*w], q, qn, kn, d2, n, i0+r4)
	}
}

// scoreFMA2x4Asm is scoreFMARows4Asm for two queries sharing the keys;
// qnv holds query 0's 16 float32 then query 1's.
//
//go:noescape
func scoreFMA2x4Asm(k, q0, q1, qnv, kn, d20, d21 *float32, rows, groups, n int)

// qnLanes lays out a query's ‖q‖² per quad head as the assembly reads it:
// heads 0 and 2 (four each), then 1 and 3.
func qnLanes(dst []float32, qn []float32) {
	for j := range 4 {
		dst[j], dst[4+j], dst[8+j], dst[12+j] = qn[0], qn[2], qn[1], qn[3]
	}
}

func scoreFMA2AVX2(k, q0, q1, qn0, qn1, kn, d20, d21 []float32, n, i0 int) {
	w := len(q0)
	rows := len(k) / w
	r4 := rows &^ 3
	if r4 > 0 {
		if i0 < 0 || i0+r4 > n || w%quadWidth != 0 || len(q1) != w || len(qn0) < quadHeads || len(qn1) < quadHeads {
			panic("gpu: scoreFMA2AVX2: rows out of range")
		}
		_, _, _ = d20[3*n+i0+r4-1], d21[3*n+i0+r4-1], kn[3*n+i0+r4-1]
		var qnv [32]float32
		qnLanes(qnv[:16], qn0)
		qnLanes(qnv[16:], qn1)
		scoreFMA2x4Asm(&k[0], &q0[0], &q1[0], &qnv[0], &kn[i0], &d20[i0], &d21[i0], r4, w/quadWidth, n)
	}
	if r4 < rows {
		scoreFMAGo(k[r4*w:rows*w], q0, qn0, kn, d20, n, i0+r4)
		scoreFMAGo(k[r4*w:rows*w], q1, qn1, kn, d21, n, i0+r4)
	}
}
