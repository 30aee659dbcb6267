package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeEngine predicts the truth after a fixed amount of "work" and holds a
// cache from the second Predict on, as the engine does for a query set of
// one batch.
type fakeEngine struct {
	calls int
	yq    []float64
}

func (e *fakeEngine) Fit(X [][]float64, y []float64) error { return nil }
func (e *fakeEngine) Predict(Xq [][]float64) ([]float64, error) {
	e.calls++
	return e.yq, nil
}
func (e *fakeEngine) CacheBytes() int64 {
	if e.calls >= 2 {
		return 1
	}
	return 0
}
func (e *fakeEngine) Close() {}

func TestMeasurePhases(t *testing.T) {
	X, y, Xq, yq := Data(50, 20, 3)
	if len(X) != 50 || len(X[0]) != 3 || len(y) != 50 || len(Xq) != 20 || len(yq) != 20 {
		t.Fatalf("Data shapes: %d×%d, %d, %d, %d", len(X), len(X[0]), len(y), len(Xq), len(yq))
	}
	e := &fakeEngine{yq: yq}
	tm, err := Measure(e, X, y, Xq, yq)
	if err != nil {
		t.Fatal(err)
	}
	if tm.CacheCall != 2 {
		t.Errorf("cache built by Predict %d, want the second", tm.CacheCall)
	}
	if e.calls != 3 {
		t.Errorf("Predict called %d times, want 3 (first, cache build, warm)", e.calls)
	}
	if tm.R2 != 1 {
		t.Errorf("R² of the truth = %v, want 1", tm.R2)
	}
	if tm.Whole.Wall != tm.Fit.Wall+tm.Predict.Wall {
		t.Errorf("whole %v is not fit %v + predict %v", tm.Whole.Wall, tm.Fit.Wall, tm.Predict.Wall)
	}
	if _, err := Measure(&errEngine{}, X, y, Xq, yq); err == nil {
		t.Error("a failing Fit measured without error")
	}
}

type errEngine struct{ fakeEngine }

func (*errEngine) Fit(X [][]float64, y []float64) error { return errors.New("boom") }

// A small grid of this tree's engine alone (no reference build): one cell
// per combination, each with its phases timed and a sane R².
func TestRunCurrentSide(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rows, cfg.Queries, cfg.Features = []int{60}, []int{30, 1500}, []int{2}
	cfg.Model = "regressd/model-2l"
	cfg.NoRef = true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Ref != nil || c.Speedup != nil {
			t.Errorf("cell %d×%d has a reference side with NoRef", c.Rows, c.Queries)
		}
		if c.Cur.Fit.Wall <= 0 || c.Cur.Predict.Wall <= 0 || !(c.Cur.R2 > 0.3) {
			t.Errorf("cell %d×%d: %+v", c.Rows, c.Queries, c.Cur)
		}
	}
	// 1,500 queries span two batches: the first Predict builds the cache.
	if got := rep.Cells[1].Cur.CacheCall; got != 1 {
		t.Errorf("1,500 queries: cache built by Predict %d, want the first", got)
	}
	if got := rep.Cells[0].Cur.CacheCall; got != 2 {
		t.Errorf("30 queries: cache built by Predict %d, want the second", got)
	}
	var b bytes.Buffer
	rep.WriteTable(&b)
	if !strings.Contains(b.String(), "60 × 1500 × 2") {
		t.Errorf("table lacks the cell:\n%s", b.String())
	}
}
