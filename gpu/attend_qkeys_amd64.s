//go:build amd64 && !purego

#include "textflag.h"

// func queryKeysAsm(qk *float32, x, anchors, inv, diff *float64, nb, f, groups, last int)
// queryKeys for one query on AVX-512F: for each of nb anchor blocks, diff
// = x − anchor (ceil(f/8) chunks of 8 float64; last: the final chunk's
// lane mask, lanes past f 0), then for each quad and group, the 8 lanes
// diff[2gi], diff[2gi+1] (repeated) times the quad's inverse length scales
// (inv: quads·g·8 float64, invLanes' layout), clamped to ±keyClamp and
// rounded to float32: keysAt's operations, lane for lane. The clamp's
// VMAXPD/VMINPD take the product as Intel's second source, which they
// return when either is NaN, as Go's max and min return the NaN.
TEXT ·queryKeysAsm(SB), NOSPLIT, $0-72
	MOVQ         qk+0(FP), DI
	MOVQ         anchors+16(FP), SI
	MOVQ         diff+32(FP), R10
	MOVQ         nb+40(FP), R11
	MOVQ         f+48(FP), R12
	SHLQ         $3, R12                // an anchor in bytes
	MOVQ         groups+56(FP), R13
	MOVQ         R13, R14
	SHLQ         $5, R14                // a block's output in bytes: g × 8 × 4
	MOVQ         R11, R15
	IMULQ        R14, R15               // a quad's output in bytes
	MOVQ         $0xC048000000000000, AX // −48.0
	VPBROADCASTQ AX, Z30
	MOVQ         $0x4048000000000000, AX // 48.0
	VPBROADCASTQ AX, Z31
	MOVQ         last+64(FP), AX
	KMOVB        AX, K2
	MOVL         $0xff, AX
	KMOVB        AX, K1

qblock:
	// diff = x − anchor, chunk by chunk; CX = chunks left, BX the offset.
	MOVQ R12, CX
	ADDQ $56, CX
	SHRQ $6, CX
	XORQ BX, BX
	MOVQ x+8(FP), DX

qdiff:
	KMOVB      K1, K3
	CMPQ       CX, $1
	JNE        qfull
	KMOVB      K2, K3

qfull:
	VMOVUPD.Z  (DX)(BX*1), K3, Z0
	VMOVUPD.Z  (SI)(BX*1), K3, Z1
	VSUBPD     Z1, Z0, Z0
	VMOVUPD    Z0, (R10)(BX*1)
	ADDQ       $64, BX
	DECQ       CX
	JNZ        qdiff

	// The three quads' groups: R8 walks inv, R9 the output.
	MOVQ inv+24(FP), R8
	MOVQ DI, R9
	MOVQ $3, AX

qquad:
	MOVQ R10, DX
	MOVQ R13, CX
	XORQ BX, BX

qgroup:
	VBROADCASTF64X2 (DX), Z2
	VMULPD          (R8), Z2, Z3
	VMAXPD          Z3, Z30, Z3
	VMINPD          Z3, Z31, Z3
	VCVTPD2PS       Z3, Y3
	VMOVUPS         Y3, (R9)(BX*1)
	ADDQ            $16, DX
	ADDQ            $64, R8
	ADDQ            $32, BX
	DECQ            CX
	JNZ             qgroup
	ADDQ            R15, R9
	DECQ            AX
	JNZ             qquad

	ADDQ R14, DI
	ADDQ R12, SI
	DECQ R11
	JNZ  qblock
	VZEROUPPER
	RET
