//go:build amd64 && !purego

#include "textflag.h"

DATA expBias<>+0(SB)/4, $1023
DATA expBias<>+4(SB)/4, $1023
DATA expBias<>+8(SB)/4, $1023
DATA expBias<>+12(SB)/4, $1023
GLOBL expBias<>(SB), RODATA|NOPTR, $16

// func expScaledAsm(dst, src *float64, n int, s, off float64, table *[14][4]float64)
// Per lane: x = s·(v − off); x ≥ 0 gives 1 (x is clamped to 0, where the
// formula gives exactly 1) and x < −708 gives 0 (masked); otherwise
// k = floor(x·log2e + ½), r = (x − k·ln2Hi) − k·ln2Lo, p by Horner from the
// innermost coefficient, times 2^k: expNeg's steps, in its order.
// table rows: 0 log2e, 1 ½, 2 ln2Hi, 3 ln2Lo, 4 −708, 5…13 coefficients.
TEXT ·expScaledAsm(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD s+24(FP), Y15
	VBROADCASTSD off+32(FP), Y14
	MOVQ         table+40(FP), DX
	VXORPD       Y12, Y12, Y12    // 0
	// Eight lanes a step as two independent chains of four, interleaved
	// (one chain's dependent multiplies and adds left the units idle);
	// each lane's operations are those of the single loop below.
	CMPQ      CX, $8
	JLT       four

eight:
	VMOVUPD   0(SI), Y0
	VMOVUPD   32(SI), Y6
	VSUBPD    Y14, Y0, Y0
	VSUBPD    Y14, Y6, Y6
	VMULPD    Y15, Y0, Y0
	VMULPD    Y15, Y6, Y6
	VCMPPD    $1, 128(DX), Y0, Y1
	VCMPPD    $1, 128(DX), Y6, Y7
	VMINPD    Y12, Y0, Y0
	VMINPD    Y12, Y6, Y6
	VMAXPD    128(DX), Y0, Y0
	VMAXPD    128(DX), Y6, Y6
	VMULPD    0(DX), Y0, Y2
	VMULPD    0(DX), Y6, Y8
	VADDPD    32(DX), Y2, Y2
	VADDPD    32(DX), Y8, Y8
	VROUNDPD  $1, Y2, Y2
	VROUNDPD  $1, Y8, Y8
	VMULPD    64(DX), Y2, Y3
	VMULPD    64(DX), Y8, Y9
	VSUBPD    Y3, Y0, Y3
	VSUBPD    Y9, Y6, Y9
	VMULPD    96(DX), Y2, Y4
	VMULPD    96(DX), Y8, Y10
	VSUBPD    Y4, Y3, Y3
	VSUBPD    Y10, Y9, Y9
	VMOVUPD   160(DX), Y5
	VMOVUPD   160(DX), Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    192(DX), Y5, Y5
	VADDPD    192(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    224(DX), Y5, Y5
	VADDPD    224(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    256(DX), Y5, Y5
	VADDPD    256(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    288(DX), Y5, Y5
	VADDPD    288(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    320(DX), Y5, Y5
	VADDPD    320(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    352(DX), Y5, Y5
	VADDPD    352(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    384(DX), Y5, Y5
	VADDPD    384(DX), Y11, Y11
	VMULPD    Y3, Y5, Y5
	VMULPD    Y9, Y11, Y11
	VADDPD    416(DX), Y5, Y5
	VADDPD    416(DX), Y11, Y11
	VCVTPD2DQY Y2, X4
	VCVTPD2DQY Y8, X10
	VPADDD    expBias<>(SB), X4, X4
	VPADDD    expBias<>(SB), X10, X10
	VPMOVZXDQ X4, Y4
	VPMOVZXDQ X10, Y10
	VPSLLQ    $52, Y4, Y4
	VPSLLQ    $52, Y10, Y10
	VMULPD    Y4, Y5, Y5
	VMULPD    Y10, Y11, Y11
	VANDNPD   Y5, Y1, Y5
	VANDNPD   Y11, Y7, Y11
	VMOVUPD   Y5, 0(DI)
	VMOVUPD   Y11, 32(DI)
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $8, CX
	CMPQ      CX, $8
	JGE       eight
	TESTQ     CX, CX
	JZ        done

four:
	// x = s·(v − off); x ≥ 0 → 0, x < −708 → −708 (masked to 0 below);
	// k = floor(x·log2e + ½); r = (x − k·ln2Hi) − k·ln2Lo; p by Horner
	// from 1/40320; p·2^k.
	VMOVUPD   0(SI), Y0
	VSUBPD    Y14, Y0, Y0
	VMULPD    Y15, Y0, Y0
	VCMPPD    $1, 128(DX), Y0, Y1
	VMINPD    Y12, Y0, Y0
	VMAXPD    128(DX), Y0, Y0
	VMULPD    0(DX), Y0, Y2
	VADDPD    32(DX), Y2, Y2
	VROUNDPD  $1, Y2, Y2
	VMULPD    64(DX), Y2, Y3
	VSUBPD    Y3, Y0, Y3
	VMULPD    96(DX), Y2, Y4
	VSUBPD    Y4, Y3, Y3
	VMOVUPD   160(DX), Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    192(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    224(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    256(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    288(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    320(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    352(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    384(DX), Y5, Y5
	VMULPD    Y3, Y5, Y5
	VADDPD    416(DX), Y5, Y5
	VCVTPD2DQY Y2, X4
	VPADDD    expBias<>(SB), X4, X4
	VPMOVZXDQ X4, Y4
	VPSLLQ    $52, Y4, Y4
	VMULPD    Y4, Y5, Y5
	VANDNPD   Y5, Y1, Y5
	VMOVUPD   Y5, 0(DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $4, CX
	JNZ       four

done:
	VZEROUPPER
	RET

// func expScaledAVX512(dst, src *float64, n int, s, off float64, table *[14][4]float64)
// expScaledAsm in eight lanes (n a positive multiple of 8), the same
// operations in the same order: VRNDSCALEPD $1 is VROUNDPD $1's floor, and
// the lanes below −708 are zeroed through a mask register.
TEXT ·expScaledAVX512(SB), NOSPLIT, $0-48
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD s+24(FP), Z15
	VBROADCASTSD off+32(FP), Z14
	MOVQ         table+40(FP), DX
	VBROADCASTSD 128(DX), Z13     // −708
	VPXORQ       Z12, Z12, Z12    // 0
	MOVL         $1023, AX
	VPBROADCASTD AX, Y11
	VBROADCASTSD 0(DX), Z16       // log2e
	VBROADCASTSD 32(DX), Z17      // ½
	VBROADCASTSD 64(DX), Z18      // ln2Hi
	VBROADCASTSD 96(DX), Z19      // ln2Lo
	VBROADCASTSD 160(DX), Z20     // 1/40320
	VBROADCASTSD 192(DX), Z21
	VBROADCASTSD 224(DX), Z22
	VBROADCASTSD 256(DX), Z23
	VBROADCASTSD 288(DX), Z24
	VBROADCASTSD 320(DX), Z25
	VBROADCASTSD 352(DX), Z26
	VBROADCASTSD 384(DX), Z27
	VBROADCASTSD 416(DX), Z28

loop512:
	VMOVUPD     (SI), Z0
	VSUBPD      Z14, Z0, Z0         // v − off
	VMULPD      Z15, Z0, Z0         // x = s·(v − off)
	VCMPPD      $1, Z13, Z0, K1     // x < −708
	KNOTW       K1, K2
	VMINPD      Z12, Z0, Z0         // x ≥ 0 → 0
	VMAXPD      Z13, Z0, Z0         // x < −708 → −708 (masked below)
	VMULPD      Z16, Z0, Z2         // x·log2e
	VADDPD      Z17, Z2, Z2         // + ½
	VRNDSCALEPD $1, Z2, Z2          // k = floor
	VMULPD      Z18, Z2, Z3         // k·ln2Hi
	VSUBPD      Z3, Z0, Z3          // x − k·ln2Hi
	VMULPD      Z19, Z2, Z4         // k·ln2Lo
	VSUBPD      Z4, Z3, Z3          // r
	VMULPD      Z3, Z20, Z5
	VADDPD      Z21, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z22, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z23, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z24, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z25, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z26, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z27, Z5, Z5
	VMULPD      Z3, Z5, Z5
	VADDPD      Z28, Z5, Z5
	VCVTPD2DQ   Z2, Y6              // int32(k)
	VPADDD      Y11, Y6, Y6         // + 1023
	VPMOVZXDQ   Y6, Z6
	VPSLLQ      $52, Z6, Z6         // 2^k
	VMULPD      Z6, Z5, Z5
	VMOVAPD.Z   Z5, K2, Z5          // 0 where x < −708
	VMOVUPD     Z5, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $8, CX
	JNZ         loop512
	VZEROUPPER
	RET
