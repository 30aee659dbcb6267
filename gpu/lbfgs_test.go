package gpu

import (
	"context"
	"testing"
)

// TestLbfgsGivesUpOnBlockedDirection: at a point whose descent direction
// points out of the box, the line search stops after its first trials
// instead of halving the step twenty times, and x stays where it was.
func TestLbfgsGivesUpOnBlockedDirection(t *testing.T) {
	evals := 0
	fn := func(x []float64) (float64, func() ([]float64, bool), bool) {
		evals++
		v := (x[0]-5)*(x[0]-5) + x[1]*x[1]
		return v, func() ([]float64, bool) { return []float64{2 * (x[0] - 5), 2 * x[1]}, true }, true
	}
	project := func(x []float64) { x[0] = min(x[0], 1) }
	x := []float64{1, 0}
	v, ok := lbfgs(context.Background(), fn, x, 10, project, nil)
	if !ok || v != 16 || x[0] != 1 || x[1] != 0 {
		t.Fatalf("lbfgs = %v, %v at %v; want 16 at [1 0]", v, ok, x)
	}
	// One evaluation at the start and the trials at steps 1, ½, ¼, ⅛.
	if evals != 5 {
		t.Fatalf("%d evaluations, want 5 (the start and four trials)", evals)
	}
}

// TestLbfgsStillSearchesFreeDirections: with one coordinate pinned at its
// bound, the others still reach their minimum.
func TestLbfgsStillSearchesFreeDirections(t *testing.T) {
	fn := func(x []float64) (float64, func() ([]float64, bool), bool) {
		v := (x[0]-5)*(x[0]-5) + (x[1]-3)*(x[1]-3)
		return v, func() ([]float64, bool) { return []float64{2 * (x[0] - 5), 2 * (x[1] - 3)}, true }, true
	}
	project := func(x []float64) { x[0] = min(x[0], 1) }
	x := []float64{0, 0}
	lbfgs(context.Background(), fn, x, 50, project, nil)
	if x[0] != 1 || x[1] < 2.99 || x[1] > 3.01 {
		t.Fatalf("lbfgs ended at %v, want [1 3]", x)
	}
}
