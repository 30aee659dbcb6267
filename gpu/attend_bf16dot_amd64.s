//go:build amd64 && !purego

#include "textflag.h"

// The dot form of the score pass on AVX512-BF16 (attend_bf16dot.go;
// scoreBF16Go is this file's Go twin, lane for lane).
//
// Go's assembler does not know VDPBF16PS (EVEX.512.F3.0F38.W0 52 /r), so
// its eight uses below are spelled out as bytes, register forms only,
// checked against GNU as / objdump:
//
//	DP_0_8_10  vdpbf16ps zmm0, zmm8, zmm10    62 d2 3e 48 52 c2
//	DP_1_9_10  vdpbf16ps zmm1, zmm9, zmm10    62 d2 36 48 52 ca
//	DP_2_8_11  vdpbf16ps zmm2, zmm8, zmm11    62 d2 3e 48 52 d3
//	DP_3_9_11  vdpbf16ps zmm3, zmm9, zmm11    62 d2 36 48 52 db
//	DP_4_8_12  vdpbf16ps zmm4, zmm8, zmm12    62 d2 3e 48 52 e4
//	DP_5_9_12  vdpbf16ps zmm5, zmm9, zmm12    62 d2 36 48 52 ec
//	DP_6_8_13  vdpbf16ps zmm6, zmm8, zmm13    62 d2 3e 48 52 f5
//	DP_7_9_13  vdpbf16ps zmm7, zmm9, zmm13    62 d2 36 48 52 fd
#define DP_0_8_10 BYTE $0x62; BYTE $0xd2; BYTE $0x3e; BYTE $0x48; BYTE $0x52; BYTE $0xc2
#define DP_1_9_10 BYTE $0x62; BYTE $0xd2; BYTE $0x36; BYTE $0x48; BYTE $0x52; BYTE $0xca
#define DP_2_8_11 BYTE $0x62; BYTE $0xd2; BYTE $0x3e; BYTE $0x48; BYTE $0x52; BYTE $0xd3
#define DP_3_9_11 BYTE $0x62; BYTE $0xd2; BYTE $0x36; BYTE $0x48; BYTE $0x52; BYTE $0xdb
#define DP_4_8_12 BYTE $0x62; BYTE $0xd2; BYTE $0x3e; BYTE $0x48; BYTE $0x52; BYTE $0xe4
#define DP_5_9_12 BYTE $0x62; BYTE $0xd2; BYTE $0x36; BYTE $0x48; BYTE $0x52; BYTE $0xec
#define DP_6_8_13 BYTE $0x62; BYTE $0xd2; BYTE $0x3e; BYTE $0x48; BYTE $0x52; BYTE $0xf5
#define DP_7_9_13 BYTE $0x62; BYTE $0xd2; BYTE $0x36; BYTE $0x48; BYTE $0x52; BYTE $0xfd

// DOTS: the eight products of one chunk (four groups of the four rows'
// keys Z10–Z13 against the query's hi Z8 and lo Z9), row r's hi into
// Z(2r), its lo into Z(2r+1).
#define DOTS \
	DP_0_8_10 \
	DP_1_9_10 \
	DP_2_8_11 \
	DP_3_9_11 \
	DP_4_8_12 \
	DP_5_9_12 \
	DP_6_8_13 \
	DP_7_9_13

// REDUCE(z, y, x, ty, tx): x = lanes l, l+8 of z added, then those of l,
// l+4 (scoreBF16Go's order); ty/tx are scratch.
#define REDUCE(z, y, x, ty, tx) \
	VEXTRACTF64X4 $1, z, ty \
	VADDPS        ty, y, y  \
	VEXTRACTF128  $1, y, tx \
	VADDPS        tx, x, x

// FINISH(x, off, out): out = max(0, (qn + kn[row]) − (x + x)), kn of the
// row at off(R12); X15 = qn, X14 = 0.
#define FINISH(x, off, out) \
	VADDPS off(R12), X15, out \
	VADDPS x, x, x            \
	VSUBPS x, out, out        \
	VMAXPS out, X14, out

// func scoreBF16Rows4Asm(k, qhi, qlo *uint16, qn, kn, d2 *float32, rows, stride, chunks, tail, n int)
// rows: a positive multiple of 4, stride bytes apart. A row is chunks full
// runs of 32 bf16 (four groups) and, if the dword mask tail ≠ 0, one more
// run of which tail selects the groups left (the rest load as 0, and no
// byte past the row is read). qn: the query's ‖q‖² per quad head; kn: each
// row's ‖k‖², 4 a row; d2: the first row's entry of head plane 0, planes n
// apart.
TEXT ·scoreBF16Rows4Asm(SB), NOSPLIT, $0-88
	MOVQ    k+0(FP), SI
	MOVQ    qhi+8(FP), R8
	MOVQ    qlo+16(FP), R13
	MOVQ    qn+24(FP), AX
	VMOVUPS (AX), X15
	VXORPS  X14, X14, X14
	MOVQ    kn+32(FP), R12
	MOVQ    d2+40(FP), R11
	MOVQ    rows+48(FP), R14
	MOVQ    stride+56(FP), AX
	MOVQ    chunks+64(FP), CX
	SHLQ    $6, CX                // full runs' bytes
	MOVQ    tail+72(FP), DX
	KMOVW   DX, K1
	MOVQ    n+80(FP), BX
	SHLQ    $2, BX                // head plane stride in bytes

rowloop:
	LEAQ    (SI)(AX*1), DI
	LEAQ    (DI)(AX*1), R9
	LEAQ    (R9)(AX*1), R10
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z2, Z2, Z2
	VPXORD  Z3, Z3, Z3
	VPXORD  Z4, Z4, Z4
	VPXORD  Z5, Z5, Z5
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7
	XORQ    DX, DX
	CMPQ    DX, CX
	JGE     tailrun

chunkloop:
	VMOVDQU32 (R8)(DX*1), Z8
	VMOVDQU32 (R13)(DX*1), Z9
	VMOVDQU32 (SI)(DX*1), Z10
	VMOVDQU32 (DI)(DX*1), Z11
	VMOVDQU32 (R9)(DX*1), Z12
	VMOVDQU32 (R10)(DX*1), Z13
	DOTS
	ADDQ    $64, DX
	CMPQ    DX, CX
	JLT     chunkloop

tailrun:
	KORTESTW K1, K1
	JZ       reduce
	VMOVDQU32.Z (R8)(DX*1), K1, Z8
	VMOVDQU32.Z (R13)(DX*1), K1, Z9
	VMOVDQU32.Z (SI)(DX*1), K1, Z10
	VMOVDQU32.Z (DI)(DX*1), K1, Z11
	VMOVDQU32.Z (R9)(DX*1), K1, Z12
	VMOVDQU32.Z (R10)(DX*1), K1, Z13
	DOTS

reduce:
	VADDPS  Z1, Z0, Z0
	VADDPS  Z3, Z2, Z2
	VADDPS  Z5, Z4, Z4
	VADDPS  Z7, Z6, Z6
	REDUCE(Z0, Y0, X0, Y1, X1)
	REDUCE(Z2, Y2, X2, Y3, X3)
	REDUCE(Z4, Y4, X4, Y5, X5)
	REDUCE(Z6, Y6, X6, Y7, X7)
	FINISH(X0, 0, X8)
	FINISH(X2, 16, X9)
	FINISH(X4, 32, X10)
	FINISH(X6, 48, X11)

	// X8–X11 hold rows 0–3, lane h = head h; transpose to head planes:
	// X4 = [r0h0 r1h0 r0h1 r1h1], X5 = [r0h2 r1h2 r0h3 r1h3], X6, X7 the
	// same for rows 2, 3; then X0–X3 = heads 0–3 of rows 0–3.
	VUNPCKLPS X9, X8, X4
	VUNPCKHPS X9, X8, X5
	VUNPCKLPS X11, X10, X6
	VUNPCKHPS X11, X10, X7
	VMOVLHPS  X6, X4, X0
	VMOVHLPS  X4, X6, X1
	VMOVLHPS  X7, X5, X2
	VMOVHLPS  X5, X7, X3
	LEAQ      (R11)(BX*2), DX
	VMOVUPS   X0, (R11)
	VMOVUPS   X1, (R11)(BX*1)
	VMOVUPS   X2, (DX)
	VMOVUPS   X3, (DX)(BX*1)
	ADDQ      $16, R11
	ADDQ      $64, R12
	LEAQ      (R10)(AX*1), SI
	SUBQ      $4, R14
	JNZ       rowloop
	VZEROUPPER
	RET
