package gpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTiledKeys holds tiledKeys' layout to the store: row i's coordinate c
// of quad qd, flushed as widenBF16Go flushes it, at its tile, lane and row;
// rows past n zero.
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
		for _, n := range []int{1, 16, 37} {
			c, rv, _ := randomScoreCase(r, CacheDTypeBF16, n, 3, 1)
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
