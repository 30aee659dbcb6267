//go:build amd64 && !purego

#include "textflag.h"

// func sqDistAccAVX512(dst, src *float64, n int, c, w float64)
// dst[j] += ((src[j]-c)·(src[j]-c))·w for j < n (n positive), eight lanes
// a step, the last n mod 8 through masked loads and stores; multiplies and
// adds as Go does them (no FMA), so every entry is the Go loop's.
TEXT ·sqDistAccAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD c+24(FP), Z1
	VBROADCASTSD w+32(FP), Z2
	XORQ         AX, AX
	MOVQ         CX, BX
	ANDQ         $7, CX
	SUBQ         CX, BX
	JZ           tail

loop:
	VMOVUPD (SI)(AX*1), Z3
	VSUBPD  Z1, Z3, Z3
	VMULPD  Z3, Z3, Z3
	VMULPD  Z2, Z3, Z3
	VADDPD  (DI)(AX*1), Z3, Z3
	VMOVUPD Z3, (DI)(AX*1)
	ADDQ    $64, AX
	SUBQ    $8, BX
	JNZ     loop

tail:
	TESTQ     CX, CX
	JZ        done
	MOVQ      $1, BX
	SHLQ      CX, BX
	DECQ      BX
	KMOVW     BX, K1
	VMOVUPD.Z (SI)(AX*1), K1, Z3
	VMOVUPD.Z (DI)(AX*1), K1, Z4
	VSUBPD    Z1, Z3, Z3
	VMULPD    Z3, Z3, Z3
	VMULPD    Z2, Z3, Z3
	VADDPD    Z4, Z3, Z3
	VMOVUPD   Z3, K1, (DI)(AX*1)

done:
	VZEROUPPER
	RET

// func sqDistAccAVX2(dst, src *float64, n int, c, w float64)
// As sqDistAccAVX512 for n a positive multiple of 4, four lanes a step.
TEXT ·sqDistAccAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD c+24(FP), Y1
	VBROADCASTSD w+32(FP), Y2
	XORQ         AX, AX

loop4:
	VMOVUPD (SI)(AX*1), Y3
	VSUBPD  Y1, Y3, Y3
	VMULPD  Y3, Y3, Y3
	VMULPD  Y2, Y3, Y3
	VADDPD  (DI)(AX*1), Y3, Y3
	VMOVUPD Y3, (DI)(AX*1)
	ADDQ    $32, AX
	SUBQ    $4, CX
	JNZ     loop4
	VZEROUPPER
	RET

// func sqDistScaledAccAVX512(dst, src *float64, n int, c, w float64)
// dst[j] += ((src[j]-c)·w)·((src[j]-c)·w) for j < n (n positive), eight lanes
// a step, the last n mod 8 through masked loads and stores; multiplies and
// adds as Go does them (no FMA), so every entry is the Go loop's.
TEXT ·sqDistScaledAccAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD c+24(FP), Z1
	VBROADCASTSD w+32(FP), Z2
	XORQ         AX, AX
	MOVQ         CX, BX
	ANDQ         $7, CX
	SUBQ         CX, BX
	JZ           stail

sloop:
	VMOVUPD (SI)(AX*1), Z3
	VSUBPD  Z1, Z3, Z3
	VMULPD  Z2, Z3, Z3
	VMULPD  Z3, Z3, Z3
	VADDPD  (DI)(AX*1), Z3, Z3
	VMOVUPD Z3, (DI)(AX*1)
	ADDQ    $64, AX
	SUBQ    $8, BX
	JNZ     sloop

stail:
	TESTQ     CX, CX
	JZ        sdone
	MOVQ      $1, BX
	SHLQ      CX, BX
	DECQ      BX
	KMOVW     BX, K1
	VMOVUPD.Z (SI)(AX*1), K1, Z3
	VMOVUPD.Z (DI)(AX*1), K1, Z4
	VSUBPD    Z1, Z3, Z3
	VMULPD    Z2, Z3, Z3
	VMULPD    Z3, Z3, Z3
	VADDPD    Z4, Z3, Z3
	VMOVUPD   Z3, K1, (DI)(AX*1)

sdone:
	VZEROUPPER
	RET

// func sqDistScaledAccAVX2(dst, src *float64, n int, c, w float64)
// As sqDistScaledAccAVX512 for n a positive multiple of 4, four lanes a step.
TEXT ·sqDistScaledAccAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD c+24(FP), Y1
	VBROADCASTSD w+32(FP), Y2
	XORQ         AX, AX

sloop4:
	VMOVUPD (SI)(AX*1), Y3
	VSUBPD  Y1, Y3, Y3
	VMULPD  Y2, Y3, Y3
	VMULPD  Y3, Y3, Y3
	VADDPD  (DI)(AX*1), Y3, Y3
	VMOVUPD Y3, (DI)(AX*1)
	ADDQ    $32, AX
	SUBQ    $4, CX
	JNZ     sloop4
	VZEROUPPER
	RET

// func wsqSumAVX512(c, x *float64, n int, z float64) float64
// Σ_{j<n} c[j]·(x[j]−z)² (n positive): two eight-lane FMA sums over
// alternate steps, the last n mod 8 through masked loads, then added
// across lanes.
TEXT ·wsqSumAVX512(SB), NOSPLIT, $0-40
	MOVQ         c+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD z+24(FP), Z1
	VPXORQ       Z8, Z8, Z8
	VPXORQ       Z9, Z9, Z9
	XORQ         AX, AX
	MOVQ         CX, BX
	ANDQ         $7, CX
	SUBQ         CX, BX
	JZ           wtail
	TESTQ        $8, BX
	JZ           wpairs
	VMOVUPD      (SI), Z3
	VSUBPD       Z1, Z3, Z3
	VMULPD       Z3, Z3, Z3
	VFMADD231PD  (DI), Z3, Z8
	MOVQ         $64, AX
	SUBQ         $8, BX
	JZ           wtail

wpairs:
	VMOVUPD     (SI)(AX*1), Z3
	VMOVUPD     64(SI)(AX*1), Z4
	VSUBPD      Z1, Z3, Z3
	VSUBPD      Z1, Z4, Z4
	VMULPD      Z3, Z3, Z3
	VMULPD      Z4, Z4, Z4
	VFMADD231PD (DI)(AX*1), Z3, Z8
	VFMADD231PD 64(DI)(AX*1), Z4, Z9
	ADDQ        $128, AX
	SUBQ        $16, BX
	JNZ         wpairs

wtail:
	TESTQ       CX, CX
	JZ          wsum
	MOVQ        $1, BX
	SHLQ        CX, BX
	DECQ        BX
	KMOVW       BX, K1
	VMOVUPD.Z   (SI)(AX*1), K1, Z3
	VMOVUPD.Z   (DI)(AX*1), K1, Z5
	VSUBPD      Z1, Z3, Z3
	VMULPD      Z3, Z3, Z3
	VFMADD231PD Z5, Z3, Z9

wsum:
	VADDPD        Z9, Z8, Z8
	VEXTRACTF64X4 $1, Z8, Y9
	VADDPD        Y9, Y8, Y8
	VEXTRACTF128  $1, Y8, X9
	VADDPD        X9, X8, X8
	VPERMILPD     $1, X8, X9
	VADDSD        X9, X8, X8
	VMOVSD        X8, ret+32(FP)
	VZEROUPPER
	RET
