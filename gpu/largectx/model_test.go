package largectx

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/regressd/regressd/gpu"
)

// plain fits one engine regressor on rows of X (all when rows is nil) and
// predicts Xq: what an internal call on that window must answer.
func plain(t *testing.T, X [][]float64, y []float64, rows []int, Xq [][]float64) []float64 {
	t.Helper()
	if rows != nil {
		tb := table{X: X, y: y}.subset(rows)
		X, y = tb.X, tb.y
	}
	r, err := gpu.NewRegressor(fast)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Fit(context.Background(), X, y); err != nil {
		t.Fatal(err)
	}
	p, err := r.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// like fits a base regressor on baseRows of X and one fitted like it on
// rows, and predicts Xq: what an internal call of a plan with a base must
// answer.
func like(t *testing.T, X [][]float64, y []float64, baseRows, rows []int, Xq [][]float64) []float64 {
	t.Helper()
	tb, tw := table{X: X, y: y}.subset(baseRows), table{X: X, y: y}.subset(rows)
	base, err := gpu.NewRegressor(fast)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if err := base.Fit(context.Background(), tb.X, tb.y); err != nil {
		t.Fatal(err)
	}
	r, err := gpu.NewRegressor(fast)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.FitLike(context.Background(), base, tw.X, tw.y); err != nil {
		t.Fatal(err)
	}
	p, err := r.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func policy(t *testing.T, spec string) *Policy {
	t.Helper()
	p, err := ParsePolicy(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestBelowThresholdIsThePlainEngine(t *testing.T) {
	X, y := regions(600, 1)
	Xq, _ := regions(50, 2)
	cfg := Config{Policy: policy(t, "cluster_route"), Threshold: 600}
	nr, made := counting()
	got, rep, err := Predict(context.Background(), cfg, nr, X, y, Xq)
	if err != nil {
		t.Fatal(err)
	}
	if want := plain(t, X, y, nil, Xq); !slices.Equal(got, want) {
		t.Error("below the threshold the predictions differ from one regressor on the whole context")
	}
	if rep.Applied || rep.Reason == nil || *rep.Reason != ReasonBelowThreshold || rep.Window != nil || rep.ShardsAvailable != nil ||
		rep.FullContext != nil || rep.NoriCalls != 0 || rep.Policy != "cluster_route" || rep.Threshold != 600 || rep.NTrain != 600 || rep.NTest != 50 || len(rep.Memory) != 1 {
		t.Errorf("report %+v", rep)
	}
	if made.Load() != 2 { // the thinking check, then the fit
		t.Errorf("%d regressors made, want 2", made.Load())
	}
}

func TestReportJSONIsTheReferenceFields(t *testing.T) {
	b, err := json.Marshal(Report{Policy: "random", Reason: ptr(ReasonBelowThreshold), Memory: []gpu.MemoryReport{{}}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"applied", "policy", "threshold", "seed", "holdout_strategy", "reason", "window", "n_train", "n_test",
		"shards_available", "nori_calls", "full_context", "reused_train_state", "gate_winner"}
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if m["window"] != nil || m["holdout_strategy"] != nil || m["reason"] != "below_threshold" {
		t.Errorf("null fields not null: %s", b)
	}
}

func TestRandomIsOneSeededWindow(t *testing.T) {
	X, y := regions(3000, 1)
	Xq, _ := regions(80, 2)
	cfg := Config{Policy: policy(t, "random"), Threshold: 1000, Window: 250, Seed: 11}
	got, rep, err := Predict(context.Background(), cfg, engine, X, y, Xq)
	if err != nil {
		t.Fatal(err)
	}
	window := sample(rng(11, streamWindow), 3000, 250)
	if want := plain(t, X, y, window, Xq); !slices.Equal(got, want) {
		t.Error("random's predictions are not one regressor's on its seeded window")
	}
	if !rep.Applied || rep.Reason != nil || *rep.Window != 250 || *rep.ShardsAvailable != 12 || rep.NoriCalls != 1 ||
		*rep.FullContext || rep.ReusedTrainState || rep.GateWinner != nil || rep.HoldoutStrategy != nil || rep.Seed != 11 {
		t.Errorf("report %+v", rep)
	}
}

func TestClusterRouteRoutesToClusterWindows(t *testing.T) {
	X, y := regions(3000, 1)
	Xq, _ := regions(120, 2)
	cfg := Config{Policy: policy(t, "cluster_route[groups=5]"), Threshold: 1000, Window: 200}
	m, err := Fit(context.Background(), cfg, engine, X, y)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got, rep, err := m.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	pl := m.deployed
	if len(pl.shards) != 5 {
		t.Fatalf("%d windows, want 5", len(pl.shards))
	}
	to := pl.route(Xq)
	used := map[int]bool{}
	for q, s := range to {
		used[s] = true
		// A query goes to the window of the cluster whose centroid is nearest.
		p := make([]float64, 2)
		pl.sp.point(p, Xq[q])
		for c := range pl.cents {
			if sqDist(p, pl.cents[c]) < sqDist(p, pl.cents[s]) {
				t.Fatalf("query %d routed to cluster %d, but %d is nearer", q, s, c)
			}
		}
	}
	if rep.NoriCalls != len(used) || rep.Policy != "cluster_route[groups=5]" || *rep.Window != 200 {
		t.Errorf("report %+v, %d windows used", rep, len(used))
	}
	for s, sh := range pl.shards {
		if len(sh.rows) != 200 || !slices.IsSorted(sh.rows) {
			t.Errorf("window %d has %d rows, want 200 ascending", s, len(sh.rows))
		}
	}
	// The base is a seeded window's worth of rows of the whole context.
	if !slices.Equal(pl.base.rows, sample(rng(0, streamBase), 3000, 200)) {
		t.Errorf("base rows %v…, want a seeded sample of 200", pl.base.rows[:min(5, len(pl.base.rows))])
	}
	// The answers of query 0's window are one regressor's on its rows,
	// fitted like the base.
	var qs []int
	var rows [][]float64
	for q, s := range to {
		if s == to[0] {
			qs, rows = append(qs, q), append(rows, Xq[q])
		}
	}
	want := like(t, X, y, pl.base.rows, pl.shards[to[0]].rows, rows)
	for a, q := range qs {
		if got[q] != want[a] {
			t.Fatalf("query %d: %v, its window's regressor says %v", q, got[q], want[a])
		}
	}
}

// TestRoutingBeatsOneRandomWindow is the policy's reason to exist: on a
// table whose target relates to the features differently by region, a
// window drawn from the query's own cluster predicts it better than one
// window drawn from everywhere, at the same window size.
func TestRoutingBeatsOneRandomWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seed   uint64
		window int
		route  string
	}{
		{"8 groups, 200-row windows", 1, 200, "cluster_route"},
		{"4 groups, 300-row windows", 3, 300, "cluster_route_g4"},
		{"8 groups, another table", 5, 250, "cluster_route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			X, y := regions(4000, tc.seed)
			Xq, yq := regions(400, tc.seed+100)
			score := func(spec string, full bool) float64 {
				cfg := Config{Policy: policy(t, spec), Threshold: 1000, Window: tc.window, Seed: uint32(tc.seed), FullFits: full}
				p, _, err := Predict(context.Background(), cfg, engine, X, y, Xq)
				if err != nil {
					t.Fatal(err)
				}
				return r2(yq, p)
			}
			rand, routed, full := score("random", false), score(tc.route, false), score(tc.route, true)
			t.Logf("R² random %.4f, %s %.4f (windows fitted in full %.4f)", rand, tc.route, routed, full)
			if routed < rand+0.01 {
				t.Errorf("R² %s %.4f is not above random's %.4f by 0.01", tc.route, routed, rand)
			}
			// Windows fitted like one base lose little to windows fitted in full.
			if routed < full-0.01 {
				t.Errorf("R² %s %.4f, with windows fitted in full %.4f", tc.route, routed, full)
			}
		})
	}
}

func TestWindowsAreFittedOnceAndReused(t *testing.T) {
	X, y := regions(3000, 1)
	Xq, _ := regions(100, 2)
	nr, made := counting()
	cfg := Config{Policy: policy(t, "cluster_route_g4"), Threshold: 1000, Window: 200}
	m, err := Fit(context.Background(), cfg, nr, X, y)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	first, rep1, err := m.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	afterFirst := made.Load()
	second, rep2, err := m.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	if rep1.ReusedTrainState || !rep2.ReusedTrainState {
		t.Errorf("reused_train_state %v then %v, want false then true", rep1.ReusedTrainState, rep2.ReusedTrainState)
	}
	if made.Load() != afterFirst {
		t.Errorf("the second call made %d more regressors, want 0", made.Load()-afterFirst)
	}
	// Fit's model check, the base, and one per call.
	if int(afterFirst) != 2+rep1.NoriCalls || rep2.NoriCalls != rep1.NoriCalls {
		t.Errorf("%d regressors for %d calls and a base; second call %d calls", afterFirst, rep1.NoriCalls, rep2.NoriCalls)
	}
	if !slices.Equal(first, second) {
		t.Error("the same queries got different answers")
	}
	// One query alone uses one window.
	_, rep3, err := m.Predict(context.Background(), Xq[:1])
	if err != nil {
		t.Fatal(err)
	}
	if rep3.NoriCalls != 1 || rep3.NTest != 1 {
		t.Errorf("one query: %d calls, n_test %d", rep3.NoriCalls, rep3.NTest)
	}
}

func TestDeterministicBySeed(t *testing.T) {
	X, y := regions(3000, 1)
	Xq, _ := regions(100, 2)
	run := func(seed uint32, par int) []float64 {
		cfg := Config{Policy: policy(t, "cluster_route[groups=4]"), Threshold: 1000, Window: 150, Seed: seed, Parallel: par}
		p, _, err := Predict(context.Background(), cfg, engine, X, y, Xq)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := run(7, 1), run(7, 3), run(8, 2)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave different predictions (parallel 1 and 3)")
	}
	if slices.Equal(a, c) {
		t.Error("another seed gave the same predictions")
	}
}

func TestGateDeploysTheBestOnItsHoldout(t *testing.T) {
	X, y := regions(4000, 1)
	Xq, yq := regions(200, 2)
	for _, holdout := range []string{HoldoutRandom, HoldoutTail} {
		t.Run(holdout, func(t *testing.T) {
			c, err := ParseRequest(Request{Policy: json.RawMessage(`["random","cluster_route"]`), Holdout: &holdout})
			if err != nil {
				t.Fatal(err)
			}
			c.Threshold, c.Window = 1000, 200
			nr, made := counting()
			m, err := Fit(context.Background(), c, nr, X, y)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			before := made.Load()
			p, rep, err := m.Predict(context.Background(), Xq)
			if err != nil {
				t.Fatal(err)
			}
			g := m.gate
			if g.best != slices.Index(g.sse, slices.Min(g.sse)) || g.best != 1 {
				t.Errorf("holdout squared errors %v, best %d; want cluster_route (1), the least, to win", g.sse, g.best)
			}
			if rep.Policy != "gate[random,cluster_route]" || rep.GateWinner == nil || *rep.GateWinner != "cluster_route" ||
				rep.HoldoutStrategy == nil || *rep.HoldoutStrategy != holdout || rep.ReusedTrainState {
				t.Errorf("report %+v", rep)
			}
			// The gate's calls on its holdout (1 for random, up to 8) count with
			// the deployed ones; the bases of the two cluster_route plans (the
			// candidate's and the deployed one) answer no query and are no call.
			deployed := len(rep.Memory)
			if rep.NoriCalls != g.calls+deployed || int(made.Load()-before) != rep.NoriCalls+2 {
				t.Errorf("nori_calls %d, gate %d + deployed %d; regressors made %d, want 2 more", rep.NoriCalls, g.calls, deployed, made.Load()-before)
			}
			if r := r2(yq, p); r < 0.95 {
				t.Errorf("R² %.4f", r)
			}
			_, rep2, err := m.Predict(context.Background(), Xq)
			if err != nil {
				t.Fatal(err)
			}
			if !rep2.ReusedTrainState || rep2.NoriCalls != deployed || *rep2.GateWinner != "cluster_route" {
				t.Errorf("second call report %+v", rep2)
			}
		})
	}
}

func TestFullContextWhenOneWindowHoldsIt(t *testing.T) {
	X, y := regions(500, 1)
	Xq, _ := regions(40, 2)
	cfg := Config{Policy: policy(t, "holdout_gate"), Threshold: 100, Window: 800}
	got, rep, err := Predict(context.Background(), cfg, engine, X, y, Xq)
	if err != nil {
		t.Fatal(err)
	}
	if want := plain(t, X, y, nil, Xq); !slices.Equal(got, want) {
		t.Error("a context within one window is not fitted whole")
	}
	if !rep.Applied || !*rep.FullContext || rep.NoriCalls != 1 || *rep.ShardsAvailable != 0 || rep.GateWinner != nil {
		t.Errorf("report %+v", rep)
	}
}

func TestRefusals(t *testing.T) {
	X, y := regions(200, 1)
	nr := NewRegressor(engine)
	ctx := context.Background()
	if _, err := Fit(ctx, Config{Policy: policy(t, "random")}, func() (*gpu.Regressor, error) { return gpu.NewRegressor("regressd/model-4l-thinking") }, X, y); !errors.Is(err, ErrThinkingModel) {
		t.Errorf("thinking model: %v, want ErrThinkingModel", err)
	}
	if _, err := Fit(ctx, Config{Threshold: -3}, nr, X, y); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad config: %v", err)
	}
	bad := slices.Clone(y)
	bad[7] = math.NaN()
	for name, tc := range map[string]struct {
		X    [][]float64
		y    []float64
		want string
	}{
		"empty":             {nil, nil, "empty context"},
		"no features":       {[][]float64{{}}, []float64{1}, "no features"},
		"targets":           {X, y[:10], "200 context rows but 10 targets"},
		"ragged":            {append(slices.Clone(X[:5]), []float64{1}), y[:6], "context row 5 has 1 features"},
		"non-finite target": {X, bad, "context row 7 has a non-finite target"},
	} {
		if _, err := Fit(ctx, Config{}, nr, tc.X, tc.y); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	m, err := Fit(ctx, Config{Policy: policy(t, "random"), Threshold: 100, Window: 50}, nr, X, y)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, _, err := m.Predict(ctx, [][]float64{{1, 2, 3}}); err == nil || !strings.Contains(err.Error(), "query row 0 has 3 features, the context 2") {
		t.Errorf("wide query: %v", err)
	}
	if p, rep, err := m.Predict(ctx, nil); err != nil || len(p) != 0 || rep.NoriCalls != 0 {
		t.Errorf("no queries: %v %v %+v", p, err, rep)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := m.Predict(cancelled, X[:3]); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	if _, err := Fit(ctx, Config{}, nil, X, y); err == nil {
		t.Error("nil NewRegressor accepted")
	}
}

// TestAnswerComposesPerRowOutputs: every query row is asked of exactly one
// internal call, so outputs other than the mean (a row of quantiles) are
// placed as the mean is.
func TestAnswerComposesPerRowOutputs(t *testing.T) {
	X, y := regions(2000, 1)
	Xq, _ := regions(90, 2)
	m, err := Fit(context.Background(), Config{Policy: policy(t, "cluster_route_g4"), Threshold: 500, Window: 150}, engine, X, y)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, _, err := m.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][2]float64, len(Xq)) // a stand-in for quantiles: the mean and its call's query count
	var mu sync.Mutex
	asked := make([]int, len(Xq))
	rep, err := m.Answer(context.Background(), Xq, func(ctx context.Context, reg *gpu.Regressor, q [][]float64, idx []int) error {
		p, err := reg.Predict(ctx, q)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for a, i := range idx {
			if !slices.Equal(q[a], Xq[i]) {
				t.Errorf("row %d of a call is not query %d", a, i)
			}
			rows[i] = [2]float64{p[a], float64(len(idx))}
			asked[i]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range Xq {
		if asked[i] != 1 || rows[i][0] != want[i] {
			t.Fatalf("query %d asked %d times, mean %v, Predict %v", i, asked[i], rows[i][0], want[i])
		}
	}
	if !rep.ReusedTrainState || len(rep.Memory) != rep.NoriCalls {
		t.Errorf("report %+v", rep)
	}
}
