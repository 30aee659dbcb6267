package gpu

import (
	"context"
	"testing"
)

// TestStoredHeadsCacheBits: a context whose solve heads Fit solved on the
// keys as a bf16 cache stores them (storedHeads, Fit's path past
// largeSolveRows) builds the bf16 cache with the same bits as one whose
// cache build solves them (solveStored), and other experts or an int8
// cache still solve.
func TestStoredHeadsCacheBits(t *testing.T) {
	ctx := context.Background()
	X, y := synth(300, 4, 5)
	r := mustFit(t, DefaultModel, X, y)
	base := r.fit
	cfg, _ := lookupConfig(DefaultModel)
	layers, err := base.storedHeads(ctx, cfg, base.scoreMask(cfg))
	if err != nil {
		t.Fatal(err)
	}
	cp := *base
	st := &cp
	st.layers = layers
	solves := 0
	for l := range layers {
		for h := range layers[l] {
			if layers[l][h].spec.kind == kindSolve {
				solves++
				if layers[l][h].stored == nil {
					t.Fatalf("layer %d head %d: a solve head without stored values", l, h)
				}
			}
		}
	}
	if solves == 0 {
		t.Fatal("the model has no solve heads")
	}
	dev := NewCPUDevice(0)
	for _, tc := range []struct {
		dtype string
		chunk int
	}{{CacheDTypeBF16, base.solveChunk}, {CacheDTypeBF16, 100}, {CacheDTypeInt8, base.solveChunk}} {
		for l := range layers {
			want, err := base.buildLayer(ctx, l, dev, tc.chunk, tc.dtype)
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.buildLayer(ctx, l, dev, tc.chunk, tc.dtype)
			if err != nil {
				t.Fatal(err)
			}
			if got.vScale != want.vScale {
				t.Fatalf("%s chunk %d layer %d: value scales %v, want %v", tc.dtype, tc.chunk, l, got.vScale, want.vScale)
			}
			for i := range want.vb {
				if got.vb[i] != want.vb[i] {
					t.Fatalf("%s chunk %d layer %d: bf16 value %d differs", tc.dtype, tc.chunk, l, i)
				}
			}
			for i := range want.vq {
				if got.vq[i] != want.vq[i] {
					t.Fatalf("%s chunk %d layer %d: int8 value %d differs", tc.dtype, tc.chunk, l, i)
				}
			}
		}
	}
}
