package eval

import (
	"context"
	"math"
	"path/filepath"
	"testing"
)

// BlockFolds cuts as numpy.array_split does: 12 rows in 5 blocks are
// 3, 3, 2, 2, 2 contiguous rows.
func TestBlockFolds(t *testing.T) {
	f := BlockFolds(12, 5)
	want := []int{0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4}
	for i, b := range want {
		for k := range f {
			if f[k][i] != (k == b) {
				t.Fatalf("row %d: in block %d = %v, want block %d only", i, k, f[k][i], b)
			}
		}
	}
}

// tenRows is a folder with one 10-row table and no split file, in blocks.
func tenRows(t *testing.T) ([]Dataset, string) {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "a.csv", "x,y\n1,1\n2,2\n3,4\n4,3\n5,5\n6,7\n7,6\n8,8\n9,9\n10,11\n")
	ds, err := LoadFolds(dir, FoldsBlocks)
	if err != nil {
		t.Fatal(err)
	}
	return ds, dir
}

// Blocks need no split file; each block is the queries once.
func TestLoadBlocks(t *testing.T) {
	ds, dir := tenRows(t)
	if len(ds[0].Test) != 5 || !ds[0].Test[0][0] || !ds[0].Test[0][1] || !ds[0].Test[4][9] || ds[0].Test[4][7] || ds[0].SHA256 == "" {
		t.Fatalf("folds %v digest %q", ds[0].Test, ds[0].SHA256)
	}
	if _, err := LoadFolds(dir, "odd"); err == nil {
		t.Error("unknown folds: want an error")
	}
}

func TestScoreIntervals(t *testing.T) {
	// Inside, 1 below (score 2 + 10·1), 2 above (2 + 10·2), on the edge.
	s := ScoreIntervals([]float64{1, -1, 5, 2}, []float64{0, 0, 1, 0}, []float64{2, 2, 3, 2}, 0.2)
	if s.Coverage != 0.5 || s.MeanWidth != 2 || math.Abs(s.Score-(2+12+22+2)/4.0) > 1e-12 {
		t.Fatalf("score %+v", s)
	}
}

// RunDetailed scores intervals per split, then their mean, and counts the
// queries flagged outside.
func TestRunDetailed(t *testing.T) {
	ds, _ := tenRows(t)
	res, err := RunDetailed(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) (Prediction, error) {
		p := Prediction{Point: make([]float64, len(Xq)), Lower: make([]float64, len(Xq)), Upper: make([]float64, len(Xq)), Outside: make([]bool, len(Xq))}
		for q, x := range Xq {
			p.Point[q], p.Lower[q], p.Upper[q] = x[0], x[0]-0.5, x[0]+0.5
			p.Outside[q] = q == 0
		}
		return p, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Datasets[0]
	if d.Queries != 10 || d.Outside != 5 || d.Intervals == nil || d.Intervals.MeanWidth != 1 || len(d.Intervals.FoldCoverage80) != 5 {
		t.Fatalf("result %+v intervals %+v", d, d.Intervals)
	}
	// y = x on 5 of 10 rows (covered); the others miss by 1 or more.
	if math.Abs(d.Intervals.Coverage-0.5) > 1e-12 || res.SuiteCoverage80 != d.Intervals.Coverage {
		t.Errorf("coverage %v, suite %v, want 0.5", d.Intervals.Coverage, res.SuiteCoverage80)
	}
	if _, err := RunDetailed(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) (Prediction, error) {
		return Prediction{Point: make([]float64, len(Xq)), Lower: make([]float64, 1)}, nil
	}, nil); err == nil {
		t.Error("bounds of the wrong length: want an error")
	}
}

// Recorded baselines apply only to the data they were computed on.
func TestBaselinesDigest(t *testing.T) {
	ds, err := LoadFolds(filepath.Join("..", "..", "testdata", "engine"), FoldsBlocks)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := LoadFoldBaselines(t.TempDir(), FoldsBlocks, "")
	if err != nil || bl == nil {
		t.Fatalf("recorded block baselines: %v %v", bl, err)
	}
	if dropped := bl.Select(ds); len(dropped) != 0 {
		t.Errorf("dropped %v: testdata/engine's files are shared/data's", dropped)
	}
	if rf := bl.Datasets["airquality"]["RF"]; len(rf.FoldR2) != 5 || bl.Intervals.Datasets["airquality"].Score == 0 {
		t.Errorf("airquality RF %+v intervals %+v", rf, bl.Intervals.Datasets["airquality"])
	}
	ds[0].SHA256 = "other"
	if dropped := bl.Select(ds); len(dropped) != 1 || dropped[0] != "airquality" || bl.Datasets["airquality"] != nil {
		t.Errorf("dropped %v, left %v", dropped, bl.Datasets["airquality"])
	}
	if bl, err := LoadFoldBaselines(t.TempDir(), FoldsRandom, ""); bl != nil || err != nil {
		t.Errorf("random baselines of an empty folder: %v %v, want none", bl, err)
	}
}
