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
type tiledState struct {
	tiledOnce sync.Once
	tiled     [quads][]uint16
}

// tiledMaxBytes bounds the tiled copy of one layer view's keys: a larger
// bf16 store (over 1.4 million rows at 8 features) keeps the untiled loop,
// with the same bits, rather than add as much again to host memory.
const tiledMaxBytes = 256 << 20

// tiledFits reports whether a tiled kernel scores store s: bf16 keys (int8
// stores keep the untiled loop) of at most tiledMaxBytes.
func tiledFits(s *layerStore) bool {
	return s.dtype != CacheDTypeInt8 && int64(len(s.kb))*2 <= tiledMaxBytes
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
		for qd := range quads {
			rv.tiled[qd] = make([]uint16, tiles*rowTile*qw)
		}
		err = parallelFor(ctx, tiles, 64, func(lo, hi int) {
			rows := min(hi*rowTile, n) - lo*rowTile
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
