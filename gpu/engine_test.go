package gpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// synth is a deterministic regression problem: a smooth nonlinear surface
// in f features plus noise, with a few missing cells.
func synth(n, f int, seed uint64) ([][]float64, []float64) {
	s := seed*0x9e3779b97f4a7c15 + 1
	next := func() float64 {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return float64(s>>11) / (1 << 53)
	}
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		X[i] = make([]float64, f)
		for d := range X[i] {
			X[i][d] = next()*4 - 2
		}
		y[i] = math.Sin(2*X[i][0]) + 0.5*X[i][1%f]*X[i][1%f] + 0.3*X[i][f-1] + 0.1*(next()-0.5)
		if i%37 == 5 {
			X[i][0] = math.NaN()
		}
	}
	return X, y
}

func mustFit(t testing.TB, model string, X [][]float64, y []float64, opts ...Option) *Regressor {
	t.Helper()
	r, err := NewRegressor(model, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Fit(context.Background(), X, y); err != nil {
		t.Fatal(err)
	}
	return r
}

func mustPredict(t testing.TB, r *Regressor, Xq [][]float64) []float64 {
	t.Helper()
	p, err := r.Predict(context.Background(), Xq)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func sameBits(t *testing.T, name string, a, b []float64) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d vs %d predictions", name, len(a), len(b))
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("%s: prediction %d differs: %v vs %v", name, i, a[i], b[i])
		}
	}
}

// TestCachedEqualsUncached: a multi-batch query set through the resident
// bf16 cache, with cache=false (context re-read every batch) and through a
// forced plain_loop gives the same bits.
func TestCachedEqualsUncached(t *testing.T) {
	X, y := synth(300, 5, 1)
	Xq, _ := synth(200, 5, 2)
	cached := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(64))
	pc := mustPredict(t, cached, Xq)
	if got := cached.MemoryReport().Rung; got != RungResidentBF16 {
		t.Fatalf("rung = %s, want %s", got, RungResidentBF16)
	}
	off, _ := ParsePolicy([]byte(`"off"`))
	uncached := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(64), WithPolicy(off))
	sameBits(t, "cache=false", pc, mustPredict(t, uncached, Xq))
	if got := uncached.MemoryReport().Rung; got != RungNoCache {
		t.Errorf("cache=false rung = %s, want %s", got, RungNoCache)
	}
	// One pass (no_cache) equals the cached multi-batch path too; a second
	// call on the same fit builds the cache and still gives the same bits.
	one := mustFit(t, "regressd/model-2l", X, y)
	sameBits(t, "one pass", pc, mustPredict(t, one, Xq))
	if got := one.MemoryReport().Rung; got != RungNoCache {
		t.Errorf("one pass rung = %s, want %s", got, RungNoCache)
	}
	sameBits(t, "second call", pc, mustPredict(t, one, Xq))
	if got := one.MemoryReport().Rung; got != RungResidentBF16 {
		t.Errorf("second call rung = %s, want %s", got, RungResidentBF16)
	}
}

// TestDeterministicAcrossGOMAXPROCS: the same request gives the same bits
// on one core and on many.
func TestDeterministicAcrossGOMAXPROCS(t *testing.T) {
	X, y := synth(250, 4, 3)
	Xq, _ := synth(100, 4, 4)
	prev := runtime.GOMAXPROCS(1)
	p1 := mustPredict(t, mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32)), Xq)
	runtime.GOMAXPROCS(max(prev, 4))
	p4 := mustPredict(t, mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(32)), Xq)
	runtime.GOMAXPROCS(prev)
	sameBits(t, "GOMAXPROCS 1 vs 4", p1, p4)
}

// TestChunkedBuild: building the cache with GP experts of one chunk that
// holds every row equals the whole build bit for bit; smaller chunks
// (several experts) give different values.
func TestChunkedBuild(t *testing.T) {
	X, y := synth(300, 4, 5)
	r := mustFit(t, DefaultModel, X, y)
	c := r.fit
	dev := NewCPUDevice(0)
	for l := range c.layers {
		whole, err := c.buildLayer(context.Background(), l, dev, 0, CacheDTypeBF16)
		if err != nil {
			t.Fatal(err)
		}
		one, err := c.buildLayer(context.Background(), l, dev, c.n, CacheDTypeBF16)
		if err != nil {
			t.Fatal(err)
		}
		three, err := c.buildLayer(context.Background(), l, dev, 100, CacheDTypeBF16)
		if err != nil {
			t.Fatal(err)
		}
		for i := range whole.vb {
			if whole.vb[i] != one.vb[i] || whole.kb[i] != one.kb[i] {
				t.Fatalf("layer %d: one-chunk build differs at %d", l, i)
			}
		}
		differs := false
		for i := range whole.vb {
			differs = differs || whole.vb[i] != three.vb[i]
		}
		if hasSolve := c.layers[l][0].spec.kind == kindSolve; hasSolve != differs {
			t.Errorf("layer %d: three-chunk values differ=%v, want %v (solve layer %v)", l, differs, hasSolve, hasSolve)
		}
	}
}

// TestDegenerateInputs: clear errors or sensible predictions, never a panic.
func TestDegenerateInputs(t *testing.T) {
	nan := math.NaN()
	X, y := synth(60, 3, 7)
	constY := make([]float64, len(y))
	for i := range constY {
		constY[i] = 4.5
	}
	constCol := make([][]float64, len(X))
	for i := range X {
		constCol[i] = []float64{X[i][0], 7, X[i][2]}
	}
	allNaN := make([][]float64, len(X))
	for i := range X {
		allNaN[i] = []float64{X[i][0], nan, X[i][2]}
	}
	nanY := append([]float64(nil), y...)
	nanY[3] = nan
	for _, tc := range []struct {
		name    string
		X       [][]float64
		y       []float64
		q       [][]float64
		wantErr string
		check   func([]float64) bool
	}{
		{name: "empty context", X: nil, y: nil, wantErr: "empty context"},
		{name: "length mismatch", X: X, y: y[:10], wantErr: "60 rows but 10 targets"},
		{name: "NaN target", X: X, y: nanY, wantErr: "target of context row 3"},
		{name: "ragged context", X: [][]float64{{1, 2}, {3}}, y: []float64{1, 2}, wantErr: "row 1 has 1 features"},
		{name: "no features", X: [][]float64{{}, {}}, y: []float64{1, 2}, wantErr: "no features"},
		{name: "one row", X: [][]float64{{1, 2}}, y: []float64{3}, q: [][]float64{{0, 0}, {5, 5}},
			check: func(p []float64) bool { return p[0] == 3 && p[1] == 3 }},
		{name: "constant target", X: X, y: constY, q: X[:5],
			check: func(p []float64) bool { return p[0] == 4.5 && p[4] == 4.5 }},
		{name: "constant feature", X: constCol, y: y, q: constCol[:5], check: finite},
		{name: "all-NaN feature", X: allNaN, y: y, q: allNaN[:5], check: finite},
		{name: "NaN and Inf in queries", X: X, y: y, q: [][]float64{{nan, nan, nan}, {math.Inf(1), 0, 0}}, check: finite},
		{name: "query width mismatch", X: X, y: y, q: [][]float64{{1}}, wantErr: "query row 0 has 1 features"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := NewRegressor("regressd/model-2l")
			err := r.Fit(context.Background(), tc.X, tc.y)
			if err == nil && tc.q != nil {
				var p []float64
				p, err = r.Predict(context.Background(), tc.q)
				if err == nil && tc.check != nil && !tc.check(p) {
					t.Errorf("predictions %v are not sensible", p)
				}
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
	r, _ := NewRegressor(DefaultModel)
	if _, err := r.Predict(context.Background(), [][]float64{{1}}); !errors.Is(err, ErrNotFitted) {
		t.Errorf("predict before fit: err = %v, want ErrNotFitted", err)
	}
	if _, err := NewRegressor("nori/model-6m"); !errors.Is(err, ErrUnknownModel) {
		t.Errorf("unknown slug: err = %v", err)
	}
	if _, err := NewRegressor("regressd/model-4l-thinking", WithPolicy(DefaultPolicy())); !errors.Is(err, ErrThinkingPolicy) {
		t.Errorf("thinking model with a policy: err = %v, want ErrThinkingPolicy", err)
	}
}

func finite(p []float64) bool {
	for _, v := range p {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// TestConcurrentPredict: Predict is safe for concurrent use after Fit and
// every caller gets the same answer.
func TestConcurrentPredict(t *testing.T) {
	X, y := synth(200, 3, 8)
	Xq, _ := synth(90, 3, 9)
	r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(30))
	want := mustPredict(t, r, Xq)
	errs := make(chan error, 4)
	outs := make([][]float64, 4)
	for g := range 4 {
		go func() {
			p, err := r.Predict(context.Background(), Xq)
			outs[g] = p
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for g := range 4 {
		sameBits(t, "concurrent", want, outs[g])
	}
}

// TestExtremeScales: a target or a feature of any finite magnitude is
// standardised, so scaling it by 1e±160 (past where squares overflow or
// underflow) scales the predictions with it instead of losing them.
func TestExtremeScales(t *testing.T) {
	X, y := synth(80, 3, 11)
	predict := func(X [][]float64, y []float64) []float64 {
		t.Helper()
		r, _ := NewRegressor("regressd/model-2l")
		if err := r.Fit(context.Background(), X, y); err != nil {
			t.Fatal(err)
		}
		p, err := r.Predict(context.Background(), X[:10])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := predict(X, y)
	for _, scale := range []float64{1e160, 1e-160} {
		ys := make([]float64, len(y))
		Xs := make([][]float64, len(X))
		for i := range y {
			ys[i] = y[i] * scale
			Xs[i] = []float64{X[i][0] * scale, X[i][1], X[i][2]}
		}
		for name, got := range map[string][]float64{
			"target":  predict(X, ys),
			"feature": predict(Xs, y),
		} {
			want := 1.0
			if name == "target" {
				want = scale
			}
			for i := range base {
				if d := math.Abs(got[i]/want - base[i]); !(d <= 1e-6*(1+math.Abs(base[i]))) {
					t.Fatalf("%s ×%g: prediction %d = %g, want %g×%g", name, scale, i, got[i], base[i], want)
				}
			}
		}
	}
}

// TestLinearTargetOnSmallContext: on a small context (the k-fold readout) a
// noiseless linear target is the trend's, and the readout must not blend in
// neighbour heads far worse than it (R² was 0.995 when it did).
func TestLinearTargetOnSmallContext(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	gen := func(n int) ([][]float64, []float64) {
		X := make([][]float64, n)
		y := make([]float64, n)
		for i := range X {
			X[i] = []float64{rng.Float64() * 10, rng.Float64() * 10, rng.Float64() * 10}
			y[i] = 2*(X[i][0]+X[i][1]+X[i][2]) + 1
		}
		return X, y
	}
	X, y := gen(100)
	Xq, yq := gen(50)
	r := mustFit(t, DefaultModel, X, y)
	if r2 := r2(yq, mustPredict(t, r, Xq)); r2 < 0.9999 {
		t.Fatalf("R² %.6f on a noiseless linear target, want ≥ 0.9999", r2)
	}
}

// TestManyFeatures: among 40 independent features of which 4 matter, the
// engine finds them (a projection to 24 principal axes lost them: R² 0.60).
func TestManyFeatures(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 41))
	gen := func(n int) ([][]float64, []float64) {
		X := make([][]float64, n)
		y := make([]float64, n)
		for i := range X {
			X[i] = make([]float64, 40)
			for d := range X[i] {
				X[i][d] = rng.NormFloat64()
			}
			y[i] = math.Sin(X[i][0]) + 0.5*(X[i][1]+X[i][2]+X[i][3]) + 0.1*rng.NormFloat64()
		}
		return X, y
	}
	X, y := gen(300)
	Xq, yq := gen(100)
	r := mustFit(t, "regressd/model-2l", X, y)
	if got := r2(yq, mustPredict(t, r, Xq)); got < 0.95 {
		t.Fatalf("R² %.4f with 40 features, 4 of them relevant; want ≥ 0.95", got)
	}
}
