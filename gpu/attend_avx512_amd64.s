//go:build amd64 && !purego

#include "textflag.h"

// The difference form of the score pass on AVX-512F, keys transposed into
// tiles of 16 rows so that a vector lane is a row (attend_tiled.go,
// attend_avx512_amd64.go).
// Each lane does the float32 operations of scoreRowsGo for its row in the
// same order — a subtract, a multiply and an add per coordinate, the sum of
// each coordinate lane over the groups, then each head's pair added — so
// the bits are portableKernel's.

// QD(qr, a0, a1, t0, t1): one query (its key slices at qr) against the
// tile's two coordinate lanes of the head in Z16 and Z17: t = k − q (the
// square of q − k to the bit), t², summed into a0 and a1. a1's add is a
// VFMADD231PS by 1.0 (Z31): the same single rounding as VADDPS, issued to
// the multiply pipes, so the adds are split between Zen 4's two add and two
// multiply pipes.
#define QD(qr, a0, a1, t0, t1) \
	VSUBPS.BCST (qr)(DX*1), Z16, t0  \
	VSUBPS.BCST 4(qr)(DX*1), Z17, t1 \
	VMULPS      t0, t0, t0           \
	VMULPS      t1, t1, t1           \
	VADDPS      t0, a0, a0           \
	VFMADD231PS Z31, t1, a1

// KEYS widens the head's two coordinate lanes of the group at BX (16 bf16
// each, already flushed) into Z16 and Z17.
#define KEYS \
	PREFETCHT0 (BX)(AX*1)   \
	VPMOVZXWD (BX), Z16     \
	VPSLLD    $16, Z16, Z16 \
	VPMOVZXWD 32(BX), Z17   \
	VPSLLD    $16, Z17, Z17

// ST(i, a0, a1): the head's d2 for query i: a0 + a1 (scoreRowsGo's pair
// sum), stored to the query's head plane at AX bytes past dp[i], the
// tile's rows in K1.
#define ST(i, a0, a1) \
	VADDPS  a1, a0, a0        \
	MOVQ    (8*i)(DI), BX     \
	PREFETCHT0 512(BX)(AX*1) \
	VMOVUPS a0, K1, (BX)(AX*1)

// SETUP loads the arguments common to the 8- and 4-query kernels: SI the
// first tile's first coordinate row of the head, DI the output pointers,
// Z31 = 1.0, and the locals: rows left, the tile's output offset and the
// block's offset in the query slices, both in bytes.
#define SETUP \
	MOVQ         kt+0(FP), SI    \
	MOVQ         dp+16(FP), DI   \
	MOVL         $0x3f800000, AX \
	VPBROADCASTD AX, Z31         \
	MOVQ         rows+24(FP), AX \
	MOVQ         AX, left-8(SP)  \
	MOVQ         $0, off-16(SP)  \
	MOVQ         $0, blk-24(SP)

// TILESTART sets K1 to the tile's rows (the low min(left, 16) bits), DX
// to the block's offset in the query slices, BX to the tile, CX to the
// groups.
#define TILESTART \
	MOVQ    left-8(SP), CX \
	MOVQ    $16, AX        \
	CMPQ    CX, AX         \
	CMOVQGT AX, CX         \
	MOVQ    $1, AX         \
	SHLQ    CX, AX         \
	DECQ    AX             \
	KMOVW   AX, K1         \
	MOVQ    blk-24(SP), DX \
	MOVQ    SI, BX         \
	MOVQ    groups+32(FP), CX \
	MOVQ    CX, AX         \
	SHLQ    $8, AX

// TILEEND, after the group loop (BX = the next tile's head row, DX = the
// next block's offset in the query slices), moves SI to the next tile,
// leaves AX = the tile's output offset for ST and steps the locals: a new
// anchor block (32 rows, two tiles) starts after every second tile.
#define TILEEND \
	MOVQ  BX, SI           \
	MOVQ  off-16(SP), AX   \
	LEAQ  64(AX), CX       \
	MOVQ  CX, off-16(SP)   \
	TESTQ $64, CX          \
	CMOVQEQ DX, CX         \
	CMOVQNE blk-24(SP), CX \
	MOVQ  CX, blk-24(SP)   \
	SUBQ  $16, left-8(SP)

// KEYS8 dequantises the head's two coordinate lanes of the group at BX (16
// int8 codes each) with the 16 rows' scales of the group at AX into Z16
// and Z17: dequantInt8Go's float32(q)·scale (exact conversion, one
// rounding) and flushTiny (Z27 = |x| mask, Z28 = the bits of the largest
// float32 below 2⁻⁴⁰; Z29 scratch).
#define KEYS8 \
	VMOVUPS    (AX), Z26      \
	VPMOVSXBD  (BX), Z16      \
	VCVTDQ2PS  Z16, Z16       \
	VMULPS     Z26, Z16, Z16  \
	VPANDD     Z27, Z16, Z29  \
	VPCMPGTD   Z28, Z29, K2   \
	VMOVAPS.Z  Z16, K2, Z16   \
	VPMOVSXBD  16(BX), Z17    \
	VCVTDQ2PS  Z17, Z17       \
	VMULPS     Z26, Z17, Z17  \
	VPANDD     Z27, Z17, Z29  \
	VPCMPGTD   Z28, Z29, K3   \
	VMOVAPS.Z  Z17, K3, Z17

// SETUP8 is SETUP for the int8 kernels: also the flush constants and the
// scale pointer's local.
#define SETUP8 \
	SETUP                          \
	MOVL         $0x7fffffff, AX   \
	VPBROADCASTD AX, Z27           \
	MOVL         $0x2b7fffff, AX   \
	VPBROADCASTD AX, Z28           \
	MOVQ         scale+40(FP), AX  \
	MOVQ         AX, scl-32(SP)

// func scoreDiffT8Asm(kt *uint16, qp, dp *[8]*float32, rows, groups int)
// One head, eight queries, rows rows (from the start of an anchor block)
// in tiles of 16 (tiledState's layout, bf16): kt is the first tile's first
// coordinate row of the head (its lane 2h of group 0; lane 2h+1 32 bytes
// on, group 1 256 bytes on, a tile 256·groups bytes on); qp[i] is query i's slices for the first block
// at the head's lane 2h (the next block qw floats on); dp[i] its head
// plane at the first row. Z0–Z15 hold the queries' two lanes' sums, a
// vector lane per row.
TEXT ·scoreDiffT8Asm(SB), NOSPLIT, $24-40
	MOVQ qp+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ 32(AX), R12
	MOVQ 40(AX), R13
	MOVQ 48(AX), R14
	MOVQ 56(AX), R15
	SETUP

tile8:
	TILESTART
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

group8:
	KEYS
	QD(R8, Z0, Z1, Z18, Z19)
	QD(R9, Z2, Z3, Z20, Z21)
	QD(R10, Z4, Z5, Z22, Z23)
	QD(R11, Z6, Z7, Z24, Z25)
	QD(R12, Z8, Z9, Z26, Z27)
	QD(R13, Z10, Z11, Z28, Z29)
	QD(R14, Z12, Z13, Z18, Z19)
	QD(R15, Z14, Z15, Z20, Z21)
	ADDQ $32, DX
	ADDQ $256, BX
	DECQ CX
	JNZ  group8

	TILEEND
	ST(0, Z0, Z1)
	ST(1, Z2, Z3)
	ST(2, Z4, Z5)
	ST(3, Z6, Z7)
	ST(4, Z8, Z9)
	ST(5, Z10, Z11)
	ST(6, Z12, Z13)
	ST(7, Z14, Z15)
	CMPQ left-8(SP), $0
	JGT  tile8
	VZEROUPPER
	RET

// func scoreDiffT4Asm(kt *uint16, qp, dp *[8]*float32, rows, groups int)
// scoreDiffT8Asm for four queries (qp[0..3], dp[0..3]).
TEXT ·scoreDiffT4Asm(SB), NOSPLIT, $24-40
	MOVQ qp+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	SETUP

tile4:
	TILESTART
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

group4:
	KEYS
	QD(R8, Z0, Z1, Z18, Z19)
	QD(R9, Z2, Z3, Z20, Z21)
	QD(R10, Z4, Z5, Z22, Z23)
	QD(R11, Z6, Z7, Z24, Z25)
	ADDQ $32, DX
	ADDQ $256, BX
	DECQ CX
	JNZ  group4

	TILEEND
	ST(0, Z0, Z1)
	ST(1, Z2, Z3)
	ST(2, Z4, Z5)
	ST(3, Z6, Z7)
	CMPQ left-8(SP), $0
	JGT  tile4
	VZEROUPPER
	RET

// func tileBF16Asm(dst, src *uint16, idx *int32, rows, qw int)
// tiledKeys' layout for one quad: rows (≥ 1) rows of qw (even) bf16 keys,
// row-major at src, into tiles of 16 rows at dst, flushed (a key whose
// bits without the sign are below 0x2b80 becomes 0), rows past rows 0.
// One gather takes a dword, coordinates c and c+1, from each of the 16
// rows (idx: their byte offsets, r·qw·2); VPMOVDW keeps its low words
// (coordinate c) and, after a shift, its high ones, each zeroed where the
// flush says.
TEXT ·tileBF16Asm(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         idx+16(FP), AX
	VMOVDQU32    (AX), Z31
	MOVQ         rows+24(FP), R8
	MOVQ         qw+32(FP), R9
	MOVQ         R9, R10
	SHLQ         $5, R10              // a tile of src in bytes: 16 rows × qw × 2
	SHRQ         $1, R9               // dword pairs a row
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x2b7f, AX
	VPBROADCASTD AX, Z29

btile:
	MOVQ    R8, CX
	MOVQ    $16, AX
	CMPQ    CX, AX
	CMOVQGT AX, CX
	MOVQ    $1, DX
	SHLQ    CX, DX
	DECQ    DX                        // the tile's rows
	MOVQ    SI, BX
	MOVQ    R9, CX

bpair:
	KMOVW       DX, K1
	VPXORD      Z0, Z0, Z0
	VPGATHERDD  (BX)(Z31*1), K1, Z0
	VPANDD      Z30, Z0, Z1
	VPCMPGTD    Z29, Z1, K2
	VPMOVDW.Z   Z0, K2, Y2
	VMOVDQU     Y2, (DI)
	VPSRLD      $16, Z0, Z3
	VPANDD      Z30, Z3, Z4
	VPCMPGTD    Z29, Z4, K3
	VPMOVDW.Z   Z3, K3, Y5
	VMOVDQU     Y5, 32(DI)
	ADDQ        $64, DI
	ADDQ        $4, BX
	DECQ        CX
	JNZ         bpair
	ADDQ        R10, SI
	SUBQ        $16, R8
	JG          btile
	VZEROUPPER
	RET

// func scoreDiffT8I8Asm(kt *int8, qp, dp *[8]*float32, rows, groups int, scale *float32)
// scoreDiffT8Asm on an int8 store's tiles (tiledState: tile, group, 8
// coordinates of 16 codes, so lane 2h+1 is 16 bytes on, group 1 128 bytes
// on, a tile 128·groups bytes on) with their scales (tile, group, 16 rows
// float32, at scale for the first tile).
TEXT ·scoreDiffT8I8Asm(SB), NOSPLIT, $32-48
	MOVQ qp+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	MOVQ 32(AX), R12
	MOVQ 40(AX), R13
	MOVQ 48(AX), R14
	MOVQ 56(AX), R15
	SETUP8

tile8i:
	TILESTART
	MOVQ   scl-32(SP), AX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

group8i:
	KEYS8
	QD(R8, Z0, Z1, Z18, Z19)
	QD(R9, Z2, Z3, Z20, Z21)
	QD(R10, Z4, Z5, Z22, Z23)
	QD(R11, Z6, Z7, Z24, Z25)
	QD(R12, Z8, Z9, Z18, Z19)
	QD(R13, Z10, Z11, Z20, Z21)
	QD(R14, Z12, Z13, Z22, Z23)
	QD(R15, Z14, Z15, Z24, Z25)
	ADDQ $32, DX
	ADDQ $128, BX
	ADDQ $64, AX
	DECQ CX
	JNZ  group8i

	MOVQ AX, scl-32(SP)
	TILEEND
	ST(0, Z0, Z1)
	ST(1, Z2, Z3)
	ST(2, Z4, Z5)
	ST(3, Z6, Z7)
	ST(4, Z8, Z9)
	ST(5, Z10, Z11)
	ST(6, Z12, Z13)
	ST(7, Z14, Z15)
	CMPQ left-8(SP), $0
	JGT  tile8i
	VZEROUPPER
	RET

// func scoreDiffT4I8Asm(kt *int8, qp, dp *[8]*float32, rows, groups int, scale *float32)
// scoreDiffT8I8Asm for four queries (qp[0..3], dp[0..3]).
TEXT ·scoreDiffT4I8Asm(SB), NOSPLIT, $32-48
	MOVQ qp+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	SETUP8

tile4i:
	TILESTART
	MOVQ   scl-32(SP), AX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7

group4i:
	KEYS8
	QD(R8, Z0, Z1, Z18, Z19)
	QD(R9, Z2, Z3, Z20, Z21)
	QD(R10, Z4, Z5, Z22, Z23)
	QD(R11, Z6, Z7, Z24, Z25)
	ADDQ $32, DX
	ADDQ $128, BX
	ADDQ $64, AX
	DECQ CX
	JNZ  group4i

	MOVQ AX, scl-32(SP)
	TILEEND
	ST(0, Z0, Z1)
	ST(1, Z2, Z3)
	ST(2, Z4, Z5)
	ST(3, Z6, Z7)
	CMPQ left-8(SP), $0
	JGT  tile4i
	VZEROUPPER
	RET

// TR4(op, …) applies op to four register pairs (Go operand order: the
// second source first), to keep the transpose's stages short.
#define TR4(op, s1, s2, d1, s3, s4, d2, s5, s6, d3, s7, s8, d4) \
	op s2, s1, d1 \
	op s4, s3, d2 \
	op s6, s5, d3 \
	op s8, s7, d4

// SPLIT(z, off) flushes and stores one transposed dword column z (16
// rows' coordinates 2p and 2p+1) at DI+off: its low words, then its high
// words, each zeroed where the flush says (Z30 = 0x7fff, Z29 = 0x2b7f).
#define SPLIT(z, off) \
	VPANDD    Z30, z, Z16   \
	VPCMPGTD  Z29, Z16, K2  \
	VPMOVDW.Z z, K2, Y17    \
	VMOVDQU32 Y17, off(DI)  \
	VPSRLD    $16, z, Z18   \
	VPANDD    Z30, Z18, Z19 \
	VPCMPGTD  Z29, Z19, K3  \
	VPMOVDW.Z Z18, K3, Y20  \
	VMOVDQU32 Y20, off+32(DI)

// func tileBF16x16Asm(dst, src *uint16, tiles, qw int)
// tileBF16Asm for whole tiles of 16 rows when qw is a multiple of 32: per
// 16 dword columns (32 coordinates) the 16 rows' 64 bytes are loaded and
// transposed in registers (unpacks of dwords and qwords, then two rounds
// of 128-bit lane shuffles), then each column is split and flushed as in
// tileBF16Asm. The same output; no gathers.
TEXT ·tileBF16x16Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ tiles+16(FP), R8
	MOVQ qw+24(FP), R11
	SHLQ $1, R11             // a row in bytes
	MOVQ R11, R10
	SHLQ $4, R10             // a tile of src in bytes
	MOVQ R11, R9
	SHRQ $6, R9              // 64-byte column blocks a row

xtile:
	MOVQ SI, DX
	MOVQ R9, CX

xblock:
	MOVQ      DX, BX
	VMOVDQU32 (BX), Z0
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z1
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z2
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z3
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z4
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z5
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z6
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z7
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z8
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z9
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z10
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z11
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z12
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z13
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z14
	ADDQ      R11, BX
	VMOVDQU32 (BX), Z15

	// Dwords: t(2i) = unpacklo(r2i, r2i+1), t(2i+1) = unpackhi.
	TR4(VPUNPCKLDQ, Z0, Z1, Z16, Z2, Z3, Z18, Z4, Z5, Z20, Z6, Z7, Z22)
	TR4(VPUNPCKHDQ, Z0, Z1, Z17, Z2, Z3, Z19, Z4, Z5, Z21, Z6, Z7, Z23)
	TR4(VPUNPCKLDQ, Z8, Z9, Z24, Z10, Z11, Z26, Z12, Z13, Z28, Z14, Z15, Z30)
	TR4(VPUNPCKHDQ, Z8, Z9, Z25, Z10, Z11, Z27, Z12, Z13, Z29, Z14, Z15, Z31)

	// Qwords: within each 128-bit lane L, r(4m+j) = column 4L+j of rows
	// 4m..4m+3.
	TR4(VPUNPCKLQDQ, Z16, Z18, Z0, Z17, Z19, Z2, Z20, Z22, Z4, Z21, Z23, Z6)
	TR4(VPUNPCKHQDQ, Z16, Z18, Z1, Z17, Z19, Z3, Z20, Z22, Z5, Z21, Z23, Z7)
	TR4(VPUNPCKLQDQ, Z24, Z26, Z8, Z25, Z27, Z10, Z28, Z30, Z12, Z29, Z31, Z14)
	TR4(VPUNPCKHQDQ, Z24, Z26, Z9, Z25, Z27, Z11, Z28, Z30, Z13, Z29, Z31, Z15)

	// Lanes, round 1: t(j) = [r(j) lanes 0, 2 | r(j+4) lanes 0, 2] (0x88),
	// t(j+4) the odd lanes (0xDD); the same for rows 8–15.
	VSHUFI32X4 $0x88, Z4, Z0, Z16
	VSHUFI32X4 $0x88, Z5, Z1, Z17
	VSHUFI32X4 $0x88, Z6, Z2, Z18
	VSHUFI32X4 $0x88, Z7, Z3, Z19
	VSHUFI32X4 $0xDD, Z4, Z0, Z20
	VSHUFI32X4 $0xDD, Z5, Z1, Z21
	VSHUFI32X4 $0xDD, Z6, Z2, Z22
	VSHUFI32X4 $0xDD, Z7, Z3, Z23
	VSHUFI32X4 $0x88, Z12, Z8, Z24
	VSHUFI32X4 $0x88, Z13, Z9, Z25
	VSHUFI32X4 $0x88, Z14, Z10, Z26
	VSHUFI32X4 $0x88, Z15, Z11, Z27
	VSHUFI32X4 $0xDD, Z12, Z8, Z28
	VSHUFI32X4 $0xDD, Z13, Z9, Z29
	VSHUFI32X4 $0xDD, Z14, Z10, Z30
	VSHUFI32X4 $0xDD, Z15, Z11, Z31

	// Lanes, round 2: column j = [t(j) lanes 0, 2 | t(j+8) lanes 0, 2].
	VSHUFI32X4 $0x88, Z24, Z16, Z0
	VSHUFI32X4 $0x88, Z25, Z17, Z1
	VSHUFI32X4 $0x88, Z26, Z18, Z2
	VSHUFI32X4 $0x88, Z27, Z19, Z3
	VSHUFI32X4 $0x88, Z28, Z20, Z4
	VSHUFI32X4 $0x88, Z29, Z21, Z5
	VSHUFI32X4 $0x88, Z30, Z22, Z6
	VSHUFI32X4 $0x88, Z31, Z23, Z7
	VSHUFI32X4 $0xDD, Z24, Z16, Z8
	VSHUFI32X4 $0xDD, Z25, Z17, Z9
	VSHUFI32X4 $0xDD, Z26, Z18, Z10
	VSHUFI32X4 $0xDD, Z27, Z19, Z11
	VSHUFI32X4 $0xDD, Z28, Z20, Z12
	VSHUFI32X4 $0xDD, Z29, Z21, Z13
	VSHUFI32X4 $0xDD, Z30, Z22, Z14
	VSHUFI32X4 $0xDD, Z31, Z23, Z15

	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x2b7f, AX
	VPBROADCASTD AX, Z29
	SPLIT(Z0, 0)
	SPLIT(Z1, 64)
	SPLIT(Z2, 128)
	SPLIT(Z3, 192)
	SPLIT(Z4, 256)
	SPLIT(Z5, 320)
	SPLIT(Z6, 384)
	SPLIT(Z7, 448)
	SPLIT(Z8, 512)
	SPLIT(Z9, 576)
	SPLIT(Z10, 640)
	SPLIT(Z11, 704)
	SPLIT(Z12, 768)
	SPLIT(Z13, 832)
	SPLIT(Z14, 896)
	SPLIT(Z15, 960)
	ADDQ $1024, DI
	ADDQ $64, DX
	DECQ CX
	JNZ  xblock
	ADDQ R10, SI
	DECQ R8
	JNZ  xtile
	VZEROUPPER
	RET
