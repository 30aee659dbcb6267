//go:build amd64 && !purego

#include "textflag.h"

// The float32 dot form of the score pass on AVX2 and FMA (attend_fma.go;
// scoreFMAGo is this file's Go twin, lane for lane).

// func scoreFMARows4Asm(k, q, qnv, kn, d2 *float32, rows, groups, n int)
// Four rows at a time, as scoreRows4Asm: Y0–Y3 hold the rows' per-lane
// sums of q·k over the groups (VFMADD231PS, lane e = coordinate e of the
// group, head e/2), reduced to heads and transposed by the same VHADDPS and
// VSHUFPS into Y1 = [rows 0–3 of head 0 | head 2], Y3 = [head 1 | head 3].
// qnv: 16 float32, ‖q‖² of heads 0, 2 (four each) then 1, 3, matching Y1
// and Y3; kn: the first row's ‖k‖² in head plane 0, planes n apart as d2's.
TEXT ·scoreFMARows4Asm(SB), NOSPLIT, $0-64
	MOVQ    k+0(FP), SI
	MOVQ    q+8(FP), R8
	MOVQ    qnv+16(FP), DX
	VMOVUPS (DX), Y13
	VMOVUPS 32(DX), Y14
	VXORPS  Y12, Y12, Y12
	MOVQ    kn+24(FP), R13
	MOVQ    d2+32(FP), R11
	MOVQ    rows+40(FP), R12
	MOVQ    groups+48(FP), AX
	SHLQ    $5, AX                // row stride in bytes: groups × 8 × 4
	MOVQ    n+56(FP), BX
	SHLQ    $2, BX                // head plane stride in bytes
	LEAQ    (BX)(BX*2), CX        // three planes

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
	VMOVUPS     (R8)(DX*1), Y4
	VFMADD231PS (SI)(DX*1), Y4, Y0
	VFMADD231PS (DI)(DX*1), Y4, Y1
	VFMADD231PS (R9)(DX*1), Y4, Y2
	VFMADD231PS (R10)(DX*1), Y4, Y3
	ADDQ        $32, DX
	CMPQ        DX, AX
	JLT         grouploop

	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VSHUFPS $0x88, Y2, Y0, Y1
	VSHUFPS $0xDD, Y2, Y0, Y3

	// d2 = max(0, (qn + kn) − (dot + dot)), heads 0 | 2 then 1 | 3.
	VMOVUPS     (R13), X5
	VINSERTF128 $1, (R13)(BX*2), Y5, Y5
	VADDPS      Y5, Y13, Y5
	VADDPS      Y1, Y1, Y1
	VSUBPS      Y1, Y5, Y5
	VMAXPS      Y5, Y12, Y5
	VMOVUPS     (R13)(BX*1), X6
	VINSERTF128 $1, (R13)(CX*1), Y6, Y6
	VADDPS      Y6, Y14, Y6
	VADDPS      Y3, Y3, Y3
	VSUBPS      Y3, Y6, Y6
	VMAXPS      Y6, Y12, Y6

	VMOVUPS      X5, (R11)
	VMOVUPS      X6, (R11)(BX*1)
	VEXTRACTF128 $1, Y5, (R11)(BX*2)
	VEXTRACTF128 $1, Y6, (R11)(CX*1)
	ADDQ         $16, R11
	ADDQ         $16, R13
	LEAQ         (R10)(AX*1), SI
	SUBQ         $4, R12
	JNZ          rowloop
	VZEROUPPER
	RET

// func scoreFMA2x4Asm(k, q0, q1, qnv, kn, d20, d21 *float32, rows, groups, n int)
// scoreFMARows4Asm for two queries at once: each key load serves both, and
// the eight running sums (Y0–Y3 query 0, Y8–Y11 query 1) are eight
// independent FMA chains, twice the four that bound one query's pass by the
// FMA latency. qnv: query 0's 16 float32 then query 1's; kn is shared.
TEXT ·scoreFMA2x4Asm(SB), NOSPLIT, $0-80
	MOVQ   k+0(FP), SI
	MOVQ   q0+8(FP), R8
	MOVQ   q1+16(FP), R14
	MOVQ   qnv+24(FP), CX
	MOVQ   kn+32(FP), R13
	MOVQ   d20+40(FP), R11
	MOVQ   d21+48(FP), R15
	MOVQ   rows+56(FP), R12
	MOVQ   groups+64(FP), AX
	SHLQ   $5, AX                 // row stride in bytes
	MOVQ   n+72(FP), BX
	SHLQ   $2, BX                 // head plane stride in bytes
	VXORPS Y12, Y12, Y12

rowloop2:
	LEAQ   (SI)(AX*1), DI
	LEAQ   (DI)(AX*1), R9
	LEAQ   (R9)(AX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ   DX, DX

grouploop2:
	VMOVUPS     (R8)(DX*1), Y4
	VMOVUPS     (R14)(DX*1), Y5
	VMOVUPS     (SI)(DX*1), Y6
	VFMADD231PS Y6, Y4, Y0
	VFMADD231PS Y6, Y5, Y8
	VMOVUPS     (DI)(DX*1), Y7
	VFMADD231PS Y7, Y4, Y1
	VFMADD231PS Y7, Y5, Y9
	VMOVUPS     (R9)(DX*1), Y6
	VFMADD231PS Y6, Y4, Y2
	VFMADD231PS Y6, Y5, Y10
	VMOVUPS     (R10)(DX*1), Y7
	VFMADD231PS Y7, Y4, Y3
	VFMADD231PS Y7, Y5, Y11
	ADDQ        $32, DX
	CMPQ        DX, AX
	JLT         grouploop2

	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VSHUFPS $0x88, Y2, Y0, Y1
	VSHUFPS $0xDD, Y2, Y0, Y3
	VHADDPS Y9, Y8, Y8
	VHADDPS Y11, Y10, Y10
	VSHUFPS $0x88, Y10, Y8, Y9
	VSHUFPS $0xDD, Y10, Y8, Y11

	// The rows' ‖k‖²: Y5 = heads 0 | 2, Y6 = heads 1 | 3.
	LEAQ        (BX)(BX*2), DX    // three planes
	VMOVUPS     (R13), X5
	VINSERTF128 $1, (R13)(BX*2), Y5, Y5
	VMOVUPS     (R13)(BX*1), X6
	VINSERTF128 $1, (R13)(DX*1), Y6, Y6

	// Query 0: d2 = max(0, (qn + kn) − (dot + dot)).
	VADDPS       (CX), Y5, Y7
	VADDPS       Y1, Y1, Y1
	VSUBPS       Y1, Y7, Y7
	VMAXPS       Y7, Y12, Y7
	VADDPS       32(CX), Y6, Y4
	VADDPS       Y3, Y3, Y3
	VSUBPS       Y3, Y4, Y4
	VMAXPS       Y4, Y12, Y4
	VMOVUPS      X7, (R11)
	VMOVUPS      X4, (R11)(BX*1)
	VEXTRACTF128 $1, Y7, (R11)(BX*2)
	VEXTRACTF128 $1, Y4, (R11)(DX*1)

	// Query 1.
	VADDPS       64(CX), Y5, Y7
	VADDPS       Y9, Y9, Y9
	VSUBPS       Y9, Y7, Y7
	VMAXPS       Y7, Y12, Y7
	VADDPS       96(CX), Y6, Y4
	VADDPS       Y11, Y11, Y11
	VSUBPS       Y11, Y4, Y4
	VMAXPS       Y4, Y12, Y4
	VMOVUPS      X7, (R15)
	VMOVUPS      X4, (R15)(BX*1)
	VEXTRACTF128 $1, Y7, (R15)(BX*2)
	VEXTRACTF128 $1, Y4, (R15)(DX*1)

	ADDQ $16, R11
	ADDQ $16, R15
	ADDQ $16, R13
	LEAQ (R10)(AX*1), SI
	SUBQ $4, R12
	JNZ  rowloop2
	VZEROUPPER
	RET
