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
