package gpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestTiledKeys holds tiledKeys' layout to the store: row i's coordinate c
// of quad qd, flushed as widenBF16Go flushes it, at its tile, lane and row;
// rows past n zero; for group counts that take the gathers only (3) and
// the in-register transposes with a gathered last tile (4, 8, 16).
func TestTiledKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 2))
	kernels := []attendKernel{portableKernel}
	kernels[0].tile = tileBF16Go
	for _, k := range attendKernels() {
		if k.tile != nil {
			kernels = append(kernels, k) // the assembly, where this machine runs it
		}
	}
	for _, kern := range kernels {
		for _, tc := range []struct{ n, g int }{{1, 3}, {16, 3}, {37, 3}, {37, 4}, {48, 16}, {5, 8}} {
			n := tc.n
			c, rv, _ := randomScoreCase(r, CacheDTypeBF16, n, tc.g, 1)
			qw := c.g * quadWidth
			tiled := rv.tiledKeys(kern)
			k := make([]float32, qw)
			for qd := range quads {
				kt := tiled[qd]
				if want := (n + rowTile - 1) / rowTile * rowTile * qw; len(kt) != want {
					t.Fatalf("%s n=%d quad %d: %d tiled keys, want %d", kern.name, n, qd, len(kt), want)
				}
				for i := range (n + rowTile - 1) / rowTile * rowTile {
					if i < n {
						widenBF16Go(k, rv.s.kb[rv.s.quadRun(qd, i):][:qw])
					} else {
						clear(k)
					}
					for e, want := range k {
						got := fromBF16(kt[((i/rowTile)*qw+e)*rowTile+i%rowTile])
						if math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%s n=%d quad %d row %d coordinate %d: %v, want %v", kern.name, n, qd, i, e, got, want)
						}
					}
				}
			}
		}
	}
}

// TestTiledSelfCheck checks that the start-up check passes on every tiled
// kernel this machine runs and fails on one that is off by one ulp in one
// entry (a tiled kernel that fails it is never chosen).
func TestTiledSelfCheck(t *testing.T) {
	ran := false
	for _, k := range attendKernels() {
		if k.scoresTiled != nil {
			ran = true
			if !tiledSelfCheck(k) {
				t.Errorf("%s fails its self-check", k.name)
			}
		}
	}
	if !ran {
		t.Log("no tiled kernel runs here (no AVX-512F): only the broken one is checked")
	}
	broken := portableKernel
	broken.name = "broken-tiled"
	broken.scoresTiled = func(_ attendKernel, c *contextFit, rv *rowView, qks, d2s [][]float32) {
		c.scoresWith(portableKernel, rv, qks, d2s)
		d2s[len(d2s)-1][5] = math.Nextafter32(d2s[len(d2s)-1][5], 0)
	}
	if tiledSelfCheck(broken) {
		t.Fatal("a tiled kernel off by one ulp passed its self-check")
	}
	avail := append(attendKernels(), broken)
	if got := chooseKernel("", avail).name; got == broken.name {
		t.Fatal("a tiled kernel that fails its self-check became the default")
	}
	if got := chooseKernel(broken.name, avail).name; got == broken.name {
		t.Fatal("a tiled kernel that fails its self-check was chosen by name")
	}
}

// TestQueryKeysFastBitIdentical holds the vector query keys
// (queryKeysFast) to keysAtGo's bits (checkQueryKeys), over feature counts
// that leave a partial chunk of eight and an odd pair.
func TestQueryKeysFastBitIdentical(t *testing.T) {
	checkQueryKeys(t, 12, []int{1, 2, 5, 8, 9, 16, 17, 33}, (*contextFit).queryKeysFast,
		"no vector query keys here (they run with a tiled score kernel: AVX-512F)")
}

// checkQueryKeys holds a vector query-key path, keys, to keysAtGo's bits,
// coordinate by coordinate, for each feature count of feats: coordinates
// that clamp, tiny and huge scales and a NaN feature, over five anchor
// blocks. keys reports false where it cannot run here: the test is then
// skipped, saying skip.
func checkQueryKeys(t *testing.T, seed uint64, feats []int, keys func(c *contextFit, l int, x []float64, out []float32) bool, skip string) {
	t.Helper()
	r := rand.New(rand.NewPCG(4, seed))
	for _, f := range feats {
		g := (f + 1) / 2
		const nb = 5
		c := &contextFit{f: f, g: g, anchors: make([]float64, nb*f), layers: make([][headsPerLayer]head, 2)}
		for i := range c.anchors {
			c.anchors[i] = r.NormFloat64()
		}
		for l := range c.layers {
			for h := range headsPerLayer {
				inv := make([]float64, f)
				for d := range inv {
					inv[d] = math.Exp(r.NormFloat64() * 3)
				}
				c.layers[l][h].inv = inv
			}
		}
		qw := g * quadWidth
		for q := range 12 {
			x := make([]float64, f)
			for d := range x {
				x[d] = r.NormFloat64() * float64(1+q*q)
			}
			if q == 11 {
				x[f-1] = math.NaN()
			}
			for l := range c.layers {
				got, want := make([]float32, quads*nb*qw), make([]float32, quads*nb*qw)
				for i := range got {
					got[i], want[i] = 7, 7 // both must write every coordinate
				}
				if !keys(c, l, x, got) {
					t.Skip(skip)
				}
				for b := range nb {
					c.keysAtGo(l, x, c.anchors[b*f:(b+1)*f], want[b*qw:], nb*qw)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("f=%d query %d layer %d entry %d: %v, want %v", f, q, l, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestRowViewTilesLargeBatches checks newRowViewFor's choice: a batch of
// tiledMinQueries or more gets its view tiled up front, a smaller one an
// untiled view (which scoresWith then scores without tiles).
func TestRowViewTilesLargeBatches(t *testing.T) {
	if archKernel.scoresTiled == nil {
		t.Skipf("the score kernel here (%s) is not a tiled one (no AVX-512F)", archKernel.name)
	}
	r := rand.New(rand.NewPCG(8, 8))
	c, rv, qks := randomScoreCase(r, CacheDTypeBF16, 40, 2, 3)
	small, err := newRowViewFor(context.Background(), rv.s, tiledMinQueries-1)
	if err != nil {
		t.Fatal(err)
	}
	large, err := newRowViewFor(context.Background(), rv.s, tiledMinQueries)
	if err != nil {
		t.Fatal(err)
	}
	if !small.untiled || small.tiled[0] != nil {
		t.Fatalf("a batch of %d: untiled %v, tiles %d", tiledMinQueries-1, small.untiled, len(small.tiled[0]))
	}
	if large.untiled || len(large.tiled[0]) == 0 {
		t.Fatalf("a batch of %d: untiled %v, tiles %d", tiledMinQueries, large.untiled, len(large.tiled[0]))
	}
	runScores(c, archKernel, small, qks)
	if small.tiled[0] != nil {
		t.Fatal("scoring an untiled view tiled it")
	}
}
