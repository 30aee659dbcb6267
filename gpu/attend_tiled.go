package gpu

import (
	"context"
	"sync"
)

// rowTile is the rows of one tile of transposed keys: one 512-bit vector
// of float32, a row a lane (attend_avx512_amd64.go scores such tiles).
const rowTile = 16

// tiledState is what rowView keeps for the tiled kernels: a bf16 store's
// keys transposed once per layer view into tiles of rowTile rows, per quad
// (tiled[qd]: tile j, coordinate c of the quad's groups·quadWidth, row r at
// (j·qw + c)·rowTile + r), flushed as the difference form reads them
// (flushTiny of the widened value is the widened value of the flushed
// bf16, so the kernel widens with no flush), rows past n zero. It is as
// large as the store's keys.
//
// An int8 store's are tiled8 (codes, the same layout) and tscale (each
// row's scale per group: tile j, group gi, row r at (j·g + gi)·rowTile + r,
// shared by the quads), dequantised and flushed by the kernel.
type tiledState struct {
	untiled   bool // the batch is too small to pay for tiles (newRowViewFor)
	tiledOnce sync.Once
	tiled     [quads][]uint16
	tiled8    [quads][]int8
	tscale    []float32
}

// tiledMinQueries is the smallest batch forward tiles a layer view for:
// tiling costs about 5–9 single-query passes of the tiled kernel per CPU
// second (BenchmarkTileKeys against BenchmarkScore, D = 96 and 384), and
// saves about one such pass a query against the untiled loop.
const tiledMinQueries = 16

// tiledMaxBytes bounds the tiled copy of one layer view's keys: a larger
// bf16 store (over 1.4 million rows at 8 features) keeps the untiled loop,
// with the same bits, rather than add as much again to host memory.
const tiledMaxBytes = 256 << 20

// tiledFits reports whether a tiled kernel scores store s: its tiled keys
// (and int8 scales) take at most tiledMaxBytes.
func tiledFits(s *layerStore) bool {
	if s.dtype == CacheDTypeInt8 {
		return int64(len(s.kq))+int64(len(s.ks))*4 <= tiledMaxBytes
	}
	return int64(len(s.kb))*2 <= tiledMaxBytes
}

// tiledKeys returns the view's keys as tiledState describes (bf16
// stores), made by kern.tile the first time (buildTiles).
func (rv *rowView) tiledKeys(kern attendKernel) *[quads][]uint16 {
	_ = rv.buildTiles(context.Background(), kern)
	return &rv.tiled
}

// buildTiles makes tiledState's keys with kern.tile, once per view, on as
// many cores as parallelFor gives (newRowView calls it before the queries
// start, so it does not stall them). An error is ctx's.
func (rv *rowView) buildTiles(ctx context.Context, kern attendKernel) error {
	var err error
	rv.tiledOnce.Do(func() {
		s := rv.s
		n, qw := s.rows, s.groups*quadWidth
		tiles := (n + rowTile - 1) / rowTile
		isInt8 := s.dtype == CacheDTypeInt8
		for qd := range quads {
			if isInt8 {
				rv.tiled8[qd] = make([]int8, tiles*rowTile*qw)
			} else {
				rv.tiled[qd] = make([]uint16, tiles*rowTile*qw)
			}
		}
		if isInt8 {
			rv.tscale = make([]float32, tiles*rowTile*s.groups)
		}
		err = parallelFor(ctx, tiles, 64, func(lo, hi int) {
			rows := min(hi*rowTile, n) - lo*rowTile
			if isInt8 {
				rv.tileInt8(lo*rowTile, rows)
				return
			}
			for qd := range quads {
				kern.tile(rv.tiled[qd][lo*rowTile*qw:], s.kb[s.quadRun(qd, lo*rowTile):][:rows*qw], rows, qw)
			}
		})
	})
	return err
}

// tileBF16Go writes rows rows of qw bf16 keys (row-major in src) into dst
// in tiledKeys' layout, flushed; dst's rows past rows stay as they are.
func tileBF16Go(dst, src []uint16, rows, qw int) {
	for i := range rows {
		d := dst[(i/rowTile)*rowTile*qw+i%rowTile:]
		for c, b := range src[i*qw : (i+1)*qw] {
			if uint32(b&0x7fff)<<16 < tinyKeyBits {
				b = 0
			}
			d[c*rowTile] = b
		}
	}
}

// tileInt8 writes rows rows of an int8 store from row i0 (a multiple of
// rowTile) into tiled8 and tscale.
func (rv *rowView) tileInt8(i0, rows int) {
	s := rv.s
	g, qw := s.groups, s.groups*quadWidth
	for i := i0; i < i0+rows; i++ {
		j, r := i/rowTile, i%rowTile
		for gi, code := range s.ks[i*g : (i+1)*g] {
			rv.tscale[(j*g+gi)*rowTile+r] = int8Scale[code]
		}
		for qd := range quads {
			d := rv.tiled8[qd][j*rowTile*qw+r:]
			for c, q := range s.kq[s.quadRun(qd, i):][:qw] {
				d[c*rowTile] = q
			}
		}
	}
}
