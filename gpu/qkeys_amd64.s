//go:build amd64 && !purego

#include "textflag.h"

// func queryKeysAVX2Asm(qk *float32, x, anchors, inv, diff *float64, nb, f, groups int)
// queryKeys for one query on AVX2: queryKeysAsm's operations (its comment
// has the layout) four lanes at a time. For each of nb anchor blocks, diff
// = x − anchor (f float64; diff[f] stays as the caller left it, 0, for an
// odd last pair), then for each quad and group the 8 lanes diff[2gi],
// diff[2gi+1] (repeated) times the quad's inverse length scales (inv:
// quads·g·8 float64), clamped to ±keyClamp and rounded to float32:
// keysAt's operations, lane for lane. VMAXPD/VMINPD take the product as
// Intel's second source, which they return when either is NaN, as Go's max
// and min return the NaN.
TEXT ·queryKeysAVX2Asm(SB), NOSPLIT, $0-64
	MOVQ         qk+0(FP), DI
	MOVQ         anchors+16(FP), SI
	MOVQ         nb+40(FP), R11
	MOVQ         f+48(FP), R12
	MOVQ         groups+56(FP), R13
	MOVQ         R13, R14
	SHLQ         $5, R14                 // a block's output in bytes: g × 8 × 4
	MOVQ         R11, R15
	IMULQ        R14, R15                // a quad's output in bytes
	MOVQ         $0xC048000000000000, AX // −48.0
	MOVQ         AX, X14
	VBROADCASTSD X14, Y14
	MOVQ         $0x4048000000000000, AX // 48.0
	MOVQ         AX, X15
	VBROADCASTSD X15, Y15

qblock:
	// diff = x − anchor; SI walks the anchors, so it ends at the next one.
	MOVQ x+8(FP), DX
	MOVQ diff+32(FP), BX
	MOVQ R12, CX

qdiff:
	VMOVSD (DX), X0
	VSUBSD (SI), X0, X0
	VMOVSD X0, (BX)
	ADDQ   $8, DX
	ADDQ   $8, SI
	ADDQ   $8, BX
	DECQ   CX
	JNZ    qdiff

	// The three quads' groups: R8 walks inv, R9 the output.
	MOVQ inv+24(FP), R8
	MOVQ DI, R9
	MOVQ $3, AX

qquad:
	MOVQ diff+32(FP), DX
	MOVQ R13, CX
	XORQ BX, BX

qgroup:
	VBROADCASTF128 (DX), Y2
	VMULPD         (R8), Y2, Y3
	VMULPD         32(R8), Y2, Y4
	VMAXPD         Y3, Y14, Y3
	VMAXPD         Y4, Y14, Y4
	VMINPD         Y3, Y15, Y3
	VMINPD         Y4, Y15, Y4
	VCVTPD2PSY     Y3, X3
	VCVTPD2PSY     Y4, X4
	VMOVUPS        X3, (R9)(BX*1)
	VMOVUPS        X4, 16(R9)(BX*1)
	ADDQ           $16, DX
	ADDQ           $64, R8
	ADDQ           $32, BX
	DECQ           CX
	JNZ            qgroup
	ADDQ           R15, R9
	DECQ           AX
	JNZ            qquad

	ADDQ R14, DI
	DECQ R11
	JNZ  qblock
	VZEROUPPER
	RET
