//go:build amd64 && !purego

#include "textflag.h"

// AVX2 loops of the attention score pass. Each does, lane by lane, the
// float32 operations of its Go counterpart in attend.go in the same order
// (VSUBPS, VMULPS, VADDPS; no FMA), so the results are bit-identical.

// FLUSH_CONSTS loads the constants of FLUSH: Y15 = |x| mask, Y14 = the
// bits of the largest float32 below 2⁻⁴⁰.
#define FLUSH_CONSTS \
	MOVL         $0x7fffffff, AX \
	MOVD         AX, X15         \
	VPBROADCASTD X15, Y15        \
	MOVL         $0x2b7fffff, AX \
	MOVD         AX, X14         \
	VPBROADCASTD X14, Y14

// FLUSH(y, tmp) is flushTiny on each lane of y: keep the lane if its bits
// without the sign, as an integer, exceed Y14 (NaNs do), else zero it.
#define FLUSH(y, tmp) \
	VPAND    Y15, y, tmp   \
	VPCMPGTD Y14, tmp, tmp \
	VPAND    tmp, y, y

// func flushAsm(dst, src *float32, n int)
// n is a positive multiple of 8.
TEXT ·flushAsm(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	FLUSH_CONSTS

flush:
	PREFETCHT0 2048(SI)
	VMOVUPS (SI), Y0
	FLUSH(Y0, Y1)
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     flush
	VZEROUPPER
	RET

// func widenBF16Asm(dst *float32, src *uint16, n int)
// n is a positive multiple of 8. bf16 → float32 is a zero extension to 32
// bits and a shift into the top half.
TEXT ·widenBF16Asm(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	FLUSH_CONSTS

widen:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	FLUSH(Y0, Y1)
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JNZ       widen
	VZEROUPPER
	RET

// func dequantInt8Asm(dst *float32, q *int8, scale *float32, groups int)
// One group: 8 int8 keys, sign-extended, converted (exactly) and
// multiplied by the group's scale.
TEXT ·dequantInt8Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ scale+16(FP), DX
	MOVQ groups+24(FP), CX
	FLUSH_CONSTS

dequant:
	VPMOVSXBD    (SI), Y0
	VCVTDQ2PS    Y0, Y0
	VBROADCASTSS (DX), Y1
	VMULPS       Y1, Y0, Y0
	FLUSH(Y0, Y1)
	VMOVUPS      Y0, (DI)
	ADDQ         $8, SI
	ADDQ         $4, DX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          dequant
	VZEROUPPER
	RET

// func scoreRows4Asm(k, q, d2 *float32, rows, groups, n int)
// Four rows at a time: Y0–Y3 hold the rows' per-lane sums over the groups
// (lane e is coordinate e of the group, i.e. head e/2), one VMOVUPS of the
// query's group serves all four rows. At the end of the rows, VHADDPS adds
// each head's pair of lanes and two VSHUFPS gather each head's four rows
// into one 16-byte store per head plane.
TEXT ·scoreRows4Asm(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), SI
	MOVQ q+8(FP), R8
	MOVQ d2+16(FP), R11
	MOVQ rows+24(FP), R12
	MOVQ groups+32(FP), AX
	SHLQ $5, AX                // row stride in bytes: groups × 8 × 4
	MOVQ n+40(FP), BX
	SHLQ $2, BX                // head plane stride in bytes
	LEAQ (BX)(BX*2), CX        // three planes

rowloop:
	LEAQ   (SI)(AX*1), DI
	LEAQ   (DI)(AX*1), R9
	LEAQ   (R9)(AX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   DX, DX

grouploop:
	VMOVUPS (R8)(DX*1), Y4
	VSUBPS  (SI)(DX*1), Y4, Y5
	VSUBPS  (DI)(DX*1), Y4, Y6
	VSUBPS  (R9)(DX*1), Y4, Y7
	VSUBPS  (R10)(DX*1), Y4, Y8
	VMULPS  Y5, Y5, Y5
	VMULPS  Y6, Y6, Y6
	VMULPS  Y7, Y7, Y7
	VMULPS  Y8, Y8, Y8
	VADDPS  Y5, Y0, Y0
	VADDPS  Y6, Y1, Y1
	VADDPS  Y7, Y2, Y2
	VADDPS  Y8, Y3, Y3
	ADDQ    $32, DX
	CMPQ    DX, AX
	JLT     grouploop

	// Y0 = [r0h0 r0h1 r1h0 r1h1 | r0h2 r0h3 r1h2 r1h3] after the first
	// VHADDPS, Y2 the same for rows 2 and 3; the shuffles give
	// Y1 = [r0h0 r1h0 r2h0 r3h0 | r0h2 … r3h2], Y3 the same for heads 1, 3.
	VHADDPS      Y1, Y0, Y0
	VHADDPS      Y3, Y2, Y2
	VSHUFPS      $0x88, Y2, Y0, Y1
	VSHUFPS      $0xDD, Y2, Y0, Y3
	VMOVUPS      X1, (R11)
	VMOVUPS      X3, (R11)(BX*1)
	VEXTRACTF128 $1, Y1, (R11)(BX*2)
	VEXTRACTF128 $1, Y3, (R11)(CX*1)
	ADDQ         $16, R11
	LEAQ         (R10)(AX*1), SI
	SUBQ         $4, R12
	JNZ          rowloop
	VZEROUPPER
	RET
