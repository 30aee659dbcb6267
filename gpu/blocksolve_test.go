package gpu

import (
	"context"
	"math"
	"testing"
)

// TestBlockSolvesMatchRebuild: the solve heads' closed-form predictions of
// a held-out block agree with the heads rebuilt on the other rows and
// scored on the block, for blocks of contiguous and of scattered rows.
func TestBlockSolvesMatchRebuild(t *testing.T) {
	ctx := context.Background()
	cfg, ok := lookupConfig("regressd/model-2l")
	if !ok {
		t.Fatal("no model-2l")
	}
	X, y := synth(300, 5, 7)
	pp, z, yt, err := fitPrep(X, y)
	if err != nil {
		t.Fatal(err)
	}
	n, f := len(X), pp.outDim
	ard := fitGP(ctx, z, n, f, yt, cfg.gp)
	iso := fitGPIso(ctx, z, n, f, yt, cfg.gp)
	score := make([]bool, n)
	for i := range score {
		score[i] = true
	}
	layers, err := buildHeads(ctx, cfg, z, n, f, yt, ard, iso, cfg.solveChunk, score, true)
	if err != nil {
		t.Fatal(err)
	}
	c := &contextFit{n: n, f: f, z: z, layers: layers, hyper: [2]gpHyper{ard, iso}, ys: yt}
	var contiguous, scattered []int
	for i := 120; i < 180; i++ {
		contiguous = append(contiguous, i)
	}
	for i := 3; i < n; i += 7 {
		scattered = append(scattered, i)
	}
	scattered[0], scattered[5] = scattered[5], scattered[0] // not in order
	for _, te := range [][]int{contiguous, scattered} {
		in := make([]bool, n)
		for _, i := range te {
			in[i] = true
		}
		var tr []int
		for i := range n {
			if !in[i] {
				tr = append(tr, i)
			}
		}
		zt, ytr := c.rowsOf(tr, yt)
		m := len(tr)
		solved, err := c.blockSolves(ctx, te, m, ard, iso, yt)
		if err != nil || solved == nil {
			t.Fatalf("blockSolves = %v, %v; want predictions", solved, err)
		}
		if other, _ := c.blockSolves(ctx, te, m-1, ard, iso, yt); other != nil {
			t.Fatal("blockSolves applied with rows missing from the fit")
		}
		ref, err := buildHeads(ctx, cfg, zt, m, f, ytr, ard, iso, cfg.solveChunk, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		invA, invI := metricInv(ard, 1), metricInv(iso, 1)
		zc := transpose(zt, m, f)
		dA, dI := newRowDists(m), newRowDists(m)
		buf := make([]float64, 2*m)
		checked := 0
		for a, i := range te {
			dA.reset(-1)
			dI.reset(-1)
			rowSqDists(dA.base, dI.base, zc, z[i*f:(i+1)*f], invA, invI)
			for l := range ref {
				for h := range ref[l] {
					hd := &ref[l][h]
					if hd.spec.kind != kindSolve {
						if solved[l*headsPerLayer+h] != nil {
							t.Fatalf("a prediction for head %d of layer %d, not a solve head", h, l)
						}
						continue
					}
					rd := dA
					if hd.spec.metric == metricISO {
						rd = dI
					}
					want := headOutput64(hd, rd, buf)
					got := solved[l*headsPerLayer+h][a]
					if math.Abs(got-want) > 1e-9*(1+math.Abs(want)) {
						t.Fatalf("row %d head %d/%d: closed form %v, rebuilt %v", i, l, h, got, want)
					}
					checked++
				}
			}
		}
		if checked == 0 {
			t.Fatal("no solve head checked")
		}
	}
}
