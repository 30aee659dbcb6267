package largectx

import (
	"context"
	"fmt"
	"math"
)

// holdoutRows is the most context rows a gate holds out to score its
// candidates on (the vendor's 2,000).
const holdoutRows = 2000

// gated is what a gate found.
type gated struct {
	best  int       // index of the winning candidate
	sse   []float64 // each candidate's squared error on the holdout
	calls int       // internal calls spent scoring
}

// choose scores every candidate of gate g on a slice held out of the
// context — each laid over the rest, with the same window and seed it
// will be deployed with — and picks the one with the least squared error
// (the best R² on the slice; ties to the earlier candidate). The winner is
// then deployed on the whole context, held-out rows included.
func (m *Model) choose(ctx context.Context, g Policy) (gated, error) {
	keep, held := split(len(m.t.X), m.cfg.window(), g.Holdout, m.cfg.Seed)
	rest, slice := m.t.subset(keep), m.t.subset(held)
	out := gated{best: 0, sse: make([]float64, len(g.Candidates))}
	for i, c := range g.Candidates {
		pl, err := newPlan(ctx, c, rest, m.cfg.window(), m.cfg.Seed, m.cfg.FullFits)
		if err != nil {
			return gated{}, fmt.Errorf("gate candidate %s: %w", c, err)
		}
		preds := make([]float64, len(slice.X))
		ans, err := answer(ctx, pl, rest, m.newReg, slice.X, m.cfg.parallel(), meanInto(preds))
		pl.close()
		if err != nil {
			return gated{}, fmt.Errorf("gate candidate %s: %w", c, err)
		}
		out.calls += ans.calls
		var sse float64
		for q, p := range preds {
			sse += (p - slice.y[q]) * (p - slice.y[q])
		}
		if math.IsNaN(sse) {
			sse = math.Inf(1)
		}
		out.sse[i] = sse
		if sse < out.sse[out.best] {
			out.best = i
		}
	}
	return out, nil
}

// split divides n context rows into the rows candidates see (keep) and the
// rows they are scored on (held), both ascending. The slice is at most
// holdoutRows and leaves a full window where the context allows, with at
// least 2 rows (an R² needs two) and never all of them: the last rows for
// "tail", a seeded sample for "random".
func split(n, window int, strategy string, seed uint32) (keep, held []int) {
	h := min(max(2, min(holdoutRows, n-window)), n-1)
	if strategy == HoldoutTail {
		keep, held = make([]int, 0, n-h), make([]int, 0, h)
		for i := range n {
			if i < n-h {
				keep = append(keep, i)
			} else {
				held = append(held, i)
			}
		}
		return keep, held
	}
	held = sample(rng(seed, streamHoldout), n, h)
	keep = make([]int, 0, n-h)
	j := 0
	for i := range n {
		if j < len(held) && held[j] == i {
			j++
			continue
		}
		keep = append(keep, i)
	}
	return keep, held
}
