package largectx

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/regressd/regressd/gpu"
)

// table is a context: rows and their targets. A subset shares the rows.
type table struct {
	X [][]float64
	y []float64
}

func (t table) subset(rows []int) table {
	s := table{X: make([][]float64, len(rows)), y: make([]float64, len(rows))}
	for a, i := range rows {
		s.X[a], s.y[a] = t.X[i], t.y[i]
	}
	return s
}

// shard is the context of one internal call: rows of a table (nil: all of
// them), fitted on first use and kept for every later query routed to it.
type shard struct {
	rows []int
	lock chan struct{} // held while fitting; a channel so waiting ends with ctx
	reg  *gpu.Regressor
}

func newShard(rows []int) *shard { return &shard{rows: rows, lock: make(chan struct{}, 1)} }

// fitted returns the shard's regressor, fitting it first if no call has;
// reused says an earlier call had. With a base, the fit keeps what base
// learnt that does not belong to its rows (gpu.Regressor.FitLike).
func (s *shard) fitted(ctx context.Context, t table, newReg NewRegressor, base *gpu.Regressor) (reg *gpu.Regressor, reused bool, err error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("wait for window fit: %w", ctx.Err())
	}
	defer func() { <-s.lock }()
	if s.reg != nil {
		return s.reg, true, nil
	}
	if s.rows != nil {
		t = t.subset(s.rows)
	}
	r, err := newReg()
	if err != nil {
		return nil, false, fmt.Errorf("new regressor: %w", err)
	}
	fit := r.Fit
	if base != nil {
		fit = func(ctx context.Context, X [][]float64, y []float64) error { return r.FitLike(ctx, base, X, y) }
	}
	if err := fit(ctx, t.X, t.y); err != nil {
		r.Close()
		return nil, false, fmt.Errorf("window of %d rows: %w", len(t.X), err)
	}
	s.reg = r
	return r, false, nil
}

func (s *shard) close() {
	if s.reg != nil {
		s.reg.Close()
		s.reg = nil
	}
}

// plan is one single (non-gate) policy laid over a table: the windows of
// its internal calls and the rule sending each query to one of them.
type plan struct {
	shards []*shard
	// base, when the plan has several windows, is fitted in full on a
	// sample of the table; each window is then fitted like it (shared.go).
	// Nil: each window is fitted in full.
	base *shard
	// cluster_route: the standardising space and one centroid per shard.
	sp    space
	cents [][]float64
}

// newPlan lays policy p over t with windows of at most window rows;
// fullFits fits each of several windows in full instead of like a base.
func newPlan(ctx context.Context, p Policy, t table, window int, seed uint32, fullFits bool) (*plan, error) {
	switch p.Name {
	case Random:
		rows := sample(rng(seed, streamWindow), len(t.X), window)
		return &plan{shards: []*shard{newShard(rows)}}, nil
	case ClusterRoute, ClusterRouteG4:
		return clusterPlan(ctx, p.Groups, t, window, seed, fullFits)
	}
	return nil, fmt.Errorf("plan: %s is not a single policy", p)
}

// clusterPlan clusters the context on its standardised features and gives
// each cluster a window: a seeded sample of its rows, or, for a cluster
// smaller than the window, the window's worth of rows nearest its centroid
// (the cluster's own rows are nearest, then its neighbours'), so every call
// has a full context.
func clusterPlan(ctx context.Context, groups int, t table, window int, seed uint32, fullFits bool) (*plan, error) {
	n, f := len(t.X), len(t.X[0])
	sp := newSpace(t.X)
	sub := sample(rng(seed, streamSample), n, kmeansRows)
	pts := make([][]float64, len(sub))
	for a, i := range sub {
		pts[a] = make([]float64, f)
		sp.point(pts[a], t.X[i])
	}
	cents, err := kmeans(ctx, pts, groups, rng(seed, streamInit))
	if err != nil {
		return nil, fmt.Errorf("cluster context: %w", err)
	}
	members := make([][]int, len(cents))
	buf := make([]float64, f)
	for i, row := range t.X {
		if i%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("assign context rows: %w", err)
			}
		}
		sp.point(buf, row)
		c := nearest(cents, buf)
		members[c] = append(members[c], i)
	}
	pl := &plan{sp: sp}
	for c, rows := range members {
		if len(rows) == 0 {
			continue // no row is nearest it: no query should be either
		}
		if len(rows) >= window {
			pick := sample(rng(seed, streamCluster+uint64(c)), len(rows), window)
			for a, k := range pick {
				pick[a] = rows[k]
			}
			rows = pick
		} else {
			rows = nearestRows(t.X, sp, cents[c], window)
		}
		pl.shards = append(pl.shards, newShard(rows))
		pl.cents = append(pl.cents, cents[c])
	}
	if len(pl.shards) > 1 && !fullFits {
		pl.base = newShard(baseRows(n, window, seed))
	}
	return pl, nil
}

// nearestRows returns the k rows of X nearest centre, in ascending order
// (ties to the lower row).
func nearestRows(X [][]float64, sp space, centre []float64, k int) []int {
	type cand struct {
		d float64
		i int
	}
	all := make([]cand, len(X))
	buf := make([]float64, len(centre))
	for i, row := range X {
		sp.point(buf, row)
		all[i] = cand{sqDist(buf, centre), i}
	}
	slices.SortFunc(all, func(a, b cand) int {
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	rows := make([]int, min(k, len(all)))
	for a := range rows {
		rows[a] = all[a].i
	}
	slices.Sort(rows)
	return rows
}

// route sends each query row to a shard.
func (pl *plan) route(Xq [][]float64) []int {
	to := make([]int, len(Xq))
	if pl.cents == nil {
		return to
	}
	buf := make([]float64, len(pl.sp.mean))
	for q, row := range Xq {
		pl.sp.point(buf, row)
		to[q] = nearest(pl.cents, buf)
	}
	return to
}

func (pl *plan) close() {
	for _, s := range pl.shards {
		s.close()
	}
	if pl.base != nil {
		pl.base.close()
	}
}
