//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// hasAVX512: this CPU and OS run the AVX-512 difference form (512-bit
// registers enabled by the OS: golang.org/x/sys/cpu reports AVX512F only
// then): AVX512F, DQ (KMOVB, VBROADCASTF64X2 in the query keys) and VL
// (EVEX stores of Y16–Y31 in the tile transpose); AVX2 for avx2Kernel's
// functions, which small batches and large stores still run.
var hasAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL

// avx512Kernel is the difference form with the rows in the vector lanes
// (attend_avx512_amd64.s): the layer view's keys are
// transposed once into tiles of 16 rows (tiledKeys), and each tile is
// scored against eight (or four) queries at once, so a key load serves
// eight queries and no horizontal sums are left to do. Every lane does
// scoreRowsGo's operations for its row in its order, so the bits are
// portableKernel's (TestScoreKernelsBitIdentical) and choosing it changes
// no output. An int8 store's codes are tiled likewise and dequantised in
// the kernel.
var avx512Kernel = func() attendKernel {
	k := avx2Kernel
	k.name, k.scoresTiled, k.tile = "avx512", scoresAVX512, tileBF16AVX512
	return k
}()

// scoreDiffT8Asm scores one head of rows rows (from the start of an anchor
// block, in tiles of rowTile) against eight queries; its comment in the
// assembly has the layout.
//
//go:noescape
func scoreDiffT8Asm(kt *uint16, qp, dp *[8]*float32, rows, groups int)

// scoreDiffT4Asm is scoreDiffT8Asm for four queries.
//
//go:noescape
func scoreDiffT4Asm(kt *uint16, qp, dp *[8]*float32, rows, groups int)

// tileBF16Asm writes one quad's keys in tiledKeys' layout (its comment in
// the assembly has the details).
//
//go:noescape
func tileBF16Asm(dst, src *uint16, idx *int32, rows, qw int)

// tileBF16AVX512 is tileBF16Go with tileBF16Asm.
func tileBF16AVX512(dst, src []uint16, rows, qw int) {
	tiles := (rows + rowTile - 1) / rowTile
	if rows <= 0 || qw%2 != 0 || len(src) < rows*qw || len(dst) < tiles*rowTile*qw {
		panic("gpu: tileBF16AVX512: buffers too small")
	}
	if full := rows / rowTile; qw%32 == 0 && full > 0 {
		// Whole tiles by in-register transposes; the rest by gathers.
		tileBF16x16Asm(&dst[0], &src[0], full, qw)
		if rows -= full * rowTile; rows == 0 {
			return
		}
		dst, src = dst[full*rowTile*qw:], src[full*rowTile*qw:]
	}
	var idx [rowTile]int32
	for r := range idx {
		idx[r] = int32(r * qw * 2)
	}
	tileBF16Asm(&dst[0], &src[0], &idx[0], rows, qw) // the gathers read only the rows the mask keeps
}

// tileBF16x16Asm is tileBF16Asm for tiles whole tiles (16 rows each) of a
// qw that is a multiple of 32, by in-register transposes.
//
//go:noescape
func tileBF16x16Asm(dst, src *uint16, tiles, qw int)

// scoreDiffT8I8Asm is scoreDiffT8Asm on an int8 store's tiles and scales.
//
//go:noescape
func scoreDiffT8I8Asm(kt *int8, qp, dp *[8]*float32, rows, groups int, scale *float32)

// scoreDiffT4I8Asm is scoreDiffT8I8Asm for four queries.
//
//go:noescape
func scoreDiffT4I8Asm(kt *int8, qp, dp *[8]*float32, rows, groups int, scale *float32)

// scoresAVX512 is scoresWith's loop on avx512Kernel for a store that
// tiledFits: per quad and chunk of rows (as scoresWith: whole anchor
// blocks, about scoreChunkFloats keys, 32 KiB of tiled bf16 or 16 KiB of
// int8 codes, with the tile's query slices in L2; 4K and 8K keys were no
// faster), each query's slices are flushed, then the queries are scored eight at a time
// (four for the rest; a last group of fewer repeats its last query, which
// writes the same bits twice), one head at a time, so the outputs in
// flight are eight rows of a head plane, each written in order.
func scoresAVX512(kern attendKernel, c *contextFit, rv *rowView, qks [][]float32, d2s [][]float32) {
	n, g, qw := rv.s.rows, c.g, c.g*quadWidth
	nq := len(qks)
	nb := (n + anchorBlock - 1) / anchorBlock
	pw := nb * qw
	for t := range d2s {
		// The assembly writes d2s[t][(qd·4+h)·n+i] for i < n and reads
		// the query's slices of every block; check the extremes here.
		if len(d2s[t]) < headsPerLayer*n || len(qks[t]) < quads*pw || rv.s.groups != g {
			panic("gpu: scoresAVX512: score planes or query keys too short")
		}
	}
	tiled := rv.tiledKeys(kern)
	isInt8 := rv.s.dtype == CacheDTypeInt8
	cb := min(nb, max(1, scoreChunkFloats/(anchorBlock*qw))) // anchorBlock: a multiple of rowTile
	cw := cb * qw
	qs := make([]float32, nq*cw)
	var qp, dp [8]*float32
	for qd := range quads {
		for lo := 0; lo < n; lo += cb * anchorBlock {
			hi := min(lo+cb*anchorBlock, n)
			b0, b1 := lo/anchorBlock, (hi+anchorBlock-1)/anchorBlock
			for t, qk := range qks {
				kern.flush(qs[t*cw:t*cw+(b1-b0)*qw], qk[qd*pw+b0*qw:qd*pw+b1*qw])
			}
			for t0 := 0; t0 < nq; t0 += 8 {
				m := min(8, nq-t0)
				for h := range quadHeads {
					for j := range 8 {
						t := t0 + min(j, m-1)
						qp[j] = &qs[t*cw+2*h]
						dp[j] = &d2s[t][(qd*quadHeads+h)*n+lo]
					}
					switch {
					case isInt8 && m > 4:
						scoreDiffT8I8Asm(&rv.tiled8[qd][lo*qw+2*h*rowTile], &qp, &dp, hi-lo, g, &rv.tscale[lo*g])
					case isInt8:
						scoreDiffT4I8Asm(&rv.tiled8[qd][lo*qw+2*h*rowTile], &qp, &dp, hi-lo, g, &rv.tscale[lo*g])
					case m > 4:
						scoreDiffT8Asm(&tiled[qd][lo*qw+2*h*rowTile], &qp, &dp, hi-lo, g)
					default:
						scoreDiffT4Asm(&tiled[qd][lo*qw+2*h*rowTile], &qp, &dp, hi-lo, g)
					}
				}
			}
		}
	}
}
