//go:build amd64 && !purego

#include "textflag.h"

// func dot4Lanes(a, b0, b1, b2, b3 *float64, m int, lanes *[16]float64)
// m is a positive multiple of 4. Y0…Y3 are the running sums of a·b0 … a·b3,
// lane j holding dot's s_j; each step multiplies, then adds (VMULPD,
// VADDPD; no FMA), as dot does, so the sums are bit-identical to dot's.
TEXT ·dot4Lanes(SB), NOSPLIT, $0-56
	MOVQ   a+0(FP), SI
	MOVQ   b0+8(FP), R8
	MOVQ   b1+16(FP), R9
	MOVQ   b2+24(FP), R10
	MOVQ   b3+32(FP), R11
	MOVQ   m+40(FP), CX
	MOVQ   lanes+48(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ   AX, AX

loop:
	VMOVUPD (SI)(AX*1), Y4
	VMULPD  (R8)(AX*1), Y4, Y5
	VADDPD  Y5, Y0, Y0
	VMULPD  (R9)(AX*1), Y4, Y6
	VADDPD  Y6, Y1, Y1
	VMULPD  (R10)(AX*1), Y4, Y7
	VADDPD  Y7, Y2, Y2
	VMULPD  (R11)(AX*1), Y4, Y8
	VADDPD  Y8, Y3, Y3
	ADDQ    $32, AX
	SUBQ    $4, CX
	JNZ     loop

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func dot2x4Lanes(a0, a1, b0, b1, b2, b3 *float64, m int, lanes *[32]float64)
// Y0…Y3: a0·b0…b3, Y4…Y7: a1·b0…b3, lane j holding dot's s_j; VMULPD then
// VADDPD (no FMA), as dot does.
TEXT ·dot2x4Lanes(SB), NOSPLIT, $0-64
	MOVQ   a0+0(FP), SI
	MOVQ   a1+8(FP), DX
	MOVQ   b0+16(FP), R8
	MOVQ   b1+24(FP), R9
	MOVQ   b2+32(FP), R10
	MOVQ   b3+40(FP), R11
	MOVQ   m+48(FP), CX
	MOVQ   lanes+56(FP), DI
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	XORQ   AX, AX

loop2x4:
	VMOVUPD (SI)(AX*1), Y8
	VMOVUPD (DX)(AX*1), Y9
	VMOVUPD (R8)(AX*1), Y10
	VMULPD  Y10, Y8, Y12
	VADDPD  Y12, Y0, Y0
	VMULPD  Y10, Y9, Y13
	VADDPD  Y13, Y4, Y4
	VMOVUPD (R9)(AX*1), Y11
	VMULPD  Y11, Y8, Y14
	VADDPD  Y14, Y1, Y1
	VMULPD  Y11, Y9, Y15
	VADDPD  Y15, Y5, Y5
	VMOVUPD (R10)(AX*1), Y10
	VMULPD  Y10, Y8, Y12
	VADDPD  Y12, Y2, Y2
	VMULPD  Y10, Y9, Y13
	VADDPD  Y13, Y6, Y6
	VMOVUPD (R11)(AX*1), Y11
	VMULPD  Y11, Y8, Y14
	VADDPD  Y14, Y3, Y3
	VMULPD  Y11, Y9, Y15
	VADDPD  Y15, Y7, Y7
	ADDQ    $32, AX
	SUBQ    $4, CX
	JNZ     loop2x4

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 128(DI)
	VMOVUPD Y5, 160(DI)
	VMOVUPD Y6, 192(DI)
	VMOVUPD Y7, 224(DI)
	VZEROUPPER
	RET
