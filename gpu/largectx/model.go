package largectx

import (
	"context"
	"errors"
	"fmt"
	"math"

	"golang.org/x/sync/errgroup"

	"github.com/regressd/regressd/gpu"
)

// NewRegressor makes the engine regressor of one internal call, with the
// model, memory policy, device and cores every call of a request shares.
// It is called once per window fitted.
type NewRegressor func() (*gpu.Regressor, error)

// ErrThinkingModel is returned when a large-context policy is given to a
// thinking model, as the vendor refuses it: its test-time search sizes its
// own working set. A caller's error (4xx).
var ErrThinkingModel = errors.New("thinking models do not take a large_context_policy")

// Model is a context fitted under a Config. Below the threshold (or with
// no policy) it is one engine regressor fitted on every row, exactly as
// without this package. Above it, the policy's work — the clustering, a
// gate's choice, each window's fit — is done on the first Predict that
// needs it and kept for the later ones. Predict is safe for concurrent
// use; Close must not run concurrently with it. X and y are read, not
// copied: the caller must not change them while the Model is in use.
type Model struct {
	cfg     Config
	newReg  NewRegressor
	t       table
	f       int
	applied bool

	whole *shard // every row in one call: below the threshold, or within one window

	lock     chan struct{} // guards gate, gated, winner and deployed
	gate     gated         // what the gate found, once gated
	gated    bool
	winner   Policy
	deployed *plan
}

// Fit prepares a Model of X (rows × features; NaN or ±Inf cells are
// missing) and y under cfg; newReg makes each internal call's regressor.
// Without a policy to apply it fits the one regressor now.
func Fit(ctx context.Context, cfg Config, newReg NewRegressor, X [][]float64, y []float64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if newReg == nil {
		return nil, errors.New("large context: nil NewRegressor")
	}
	f, err := checkContext(X, y)
	if err != nil {
		return nil, fmt.Errorf("large context: %w", err)
	}
	m := &Model{
		cfg: cfg, newReg: newReg, t: table{X: X, y: y}, f: f,
		applied: cfg.Policy != nil && len(X) > cfg.threshold(),
		whole:   newShard(nil),
		lock:    make(chan struct{}, 1),
	}
	if cfg.Policy != nil {
		r, err := newReg()
		if err != nil {
			return nil, fmt.Errorf("large context: new regressor: %w", err)
		}
		thinking := r.Model().Thinking
		r.Close()
		if thinking {
			return nil, fmt.Errorf("large context: %w (model %s)", ErrThinkingModel, r.Model().Slug)
		}
	}
	if !m.applied {
		if _, _, err := m.whole.fitted(ctx, m.t, newReg, nil); err != nil {
			if cfg.Policy == nil {
				// No policy was asked for: the whole context is one plain
				// fit, and its error should read as one.
				if inner := errors.Unwrap(err); inner != nil {
					err = inner
				}
				return nil, err
			}
			return nil, fmt.Errorf("large context: %w", err)
		}
	}
	return m, nil
}

// Predict is Fit, then Model.Predict, then Close: one request.
func Predict(ctx context.Context, cfg Config, newReg NewRegressor, X [][]float64, y []float64, Xq [][]float64) ([]float64, Report, error) {
	m, err := Fit(ctx, cfg, newReg, X, y)
	if err != nil {
		return nil, Report{}, err
	}
	defer m.Close()
	return m.Predict(ctx, Xq)
}

// Predict answers the query rows Xq with each internal call's mean
// predictions and reports what the policy did. Once ctx ends it stops and
// returns an error wrapping ctx.Err(); work already finished (fitted
// windows) is kept for the next call.
func (m *Model) Predict(ctx context.Context, Xq [][]float64) ([]float64, Report, error) {
	preds := make([]float64, len(Xq))
	rep, err := m.Answer(ctx, Xq, meanInto(preds))
	if err != nil {
		return nil, rep, err
	}
	return preds, rep, nil
}

// Ask is one internal call's part of an Answer: reg, fitted on the call's
// window, is asked for the query rows routed to it (rows, at positions idx
// of the query set). It must write only the outputs of its own positions:
// calls run concurrently.
type Ask func(ctx context.Context, reg *gpu.Regressor, rows [][]float64, idx []int) error

// meanInto is the Ask of Predict: mean predictions, placed into preds.
func meanInto(preds []float64) Ask {
	return func(ctx context.Context, reg *gpu.Regressor, rows [][]float64, idx []int) error {
		p, err := reg.Predict(ctx, rows)
		if err != nil {
			return fmt.Errorf("predict %d rows: %w", len(rows), err)
		}
		for a, q := range idx {
			preds[q] = p[a]
		}
		return nil
	}
}

// Answer is Predict for any per-row output: it calls ask once per internal
// call, at most Config.Parallel at once. Every query row goes to exactly
// one call, so per-row outputs — a mean, a row of quantiles — compose by
// placing them where idx says. A gate still chooses its winner by mean
// predictions.
func (m *Model) Answer(ctx context.Context, Xq [][]float64, ask Ask) (Report, error) {
	rep := m.report(len(Xq))
	for q, row := range Xq {
		if len(row) != m.f {
			return rep, fmt.Errorf("large context: query row %d has %d features, the context %d", q, len(row), m.f)
		}
	}
	if len(Xq) == 0 {
		return rep, nil
	}
	if !m.applied || len(m.t.X) <= m.cfg.window() {
		ans, err := answer(ctx, &plan{shards: []*shard{m.whole}}, m.t, m.newReg, Xq, 1, ask)
		if err != nil {
			if m.cfg.Policy == nil {
				return rep, err // one plain call, as in Fit
			}
			return rep, fmt.Errorf("large context: %w", err)
		}
		rep.Memory = ans.mem
		if m.applied {
			rep.FullContext, rep.NoriCalls, rep.ReusedTrainState = ptr(true), 1, ans.reused
		}
		return rep, nil
	}
	pl, st, err := m.plan(ctx)
	if err != nil {
		return rep, fmt.Errorf("large context: %w", err)
	}
	if m.cfg.Policy.IsGate() {
		rep.HoldoutStrategy, rep.GateWinner = ptr(m.cfg.Policy.Holdout), ptr(m.winner.String())
	}
	ans, err := answer(ctx, pl, m.t, m.newReg, Xq, m.cfg.parallel(), ask)
	if err != nil {
		return rep, fmt.Errorf("large context: %w", err)
	}
	rep.NoriCalls = st.calls + ans.calls
	rep.ReusedTrainState = st.reused || ans.reused
	rep.Memory = ans.mem
	return rep, nil
}

// report is the Report of a call with nq query rows, before it runs.
func (m *Model) report(nq int) Report {
	rep := Report{Threshold: m.cfg.threshold(), Seed: m.cfg.Seed, NTrain: len(m.t.X), NTest: nq}
	if m.cfg.Policy != nil {
		rep.Policy = m.cfg.Policy.String()
	}
	if !m.applied {
		rep.Reason = ptr(ReasonBelowThreshold)
		return rep
	}
	w := m.cfg.window()
	rep.Applied, rep.Window, rep.ShardsAvailable, rep.FullContext = true, ptr(w), ptr(len(m.t.X)/w), ptr(false)
	return rep
}

// derived says what deriving a plan cost this call.
type derived struct {
	calls  int  // internal calls a gate made
	reused bool // an earlier call had derived some of it
}

// plan returns the deployed policy's plan, deriving it — and a gate's
// choice first — if no call has.
func (m *Model) plan(ctx context.Context) (*plan, derived, error) {
	select {
	case m.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, derived{}, fmt.Errorf("wait for policy: %w", ctx.Err())
	}
	defer func() { <-m.lock }()
	if m.deployed != nil {
		return m.deployed, derived{reused: true}, nil
	}
	var st derived
	p := *m.cfg.Policy
	if p.IsGate() {
		if m.gated {
			st.reused = true
		} else {
			g, err := m.choose(ctx, p)
			if err != nil {
				return nil, st, err
			}
			m.gate, m.winner, m.gated, st.calls = g, p.Candidates[g.best], true, g.calls
		}
		p = m.winner
	}
	pl, err := newPlan(ctx, p, m.t, m.cfg.window(), m.cfg.Seed, m.cfg.FullFits)
	if err != nil {
		return nil, st, err
	}
	m.deployed = pl
	return pl, st, nil
}

// Close releases every internal regressor (their caches' device memory).
func (m *Model) Close() error {
	m.whole.close()
	if m.deployed != nil {
		m.deployed.close()
	}
	return nil
}

// answered is what answer did.
type answered struct {
	calls  int
	reused bool
	mem    []gpu.MemoryReport
}

// answer fits the shards of pl that no call has yet and asks each for the
// queries routed to it, at most par calls at once.
func answer(ctx context.Context, pl *plan, t table, newReg NewRegressor, Xq [][]float64, par int, ask Ask) (answered, error) {
	byShard := make([][]int, len(pl.shards))
	for q, s := range pl.route(Xq) {
		byShard[s] = append(byShard[s], q)
	}
	base, err := pl.fittedBase(ctx, t, newReg)
	if err != nil {
		return answered{}, err
	}
	mem := make([]gpu.MemoryReport, len(pl.shards))
	reused := make([]bool, len(pl.shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for s, qs := range byShard {
		if len(qs) == 0 {
			continue
		}
		g.Go(func() error {
			reg, r, err := pl.shards[s].fitted(gctx, t, newReg, base)
			if err != nil {
				return err
			}
			rows := make([][]float64, len(qs))
			for a, q := range qs {
				rows[a] = Xq[q]
			}
			if err := ask(gctx, reg, rows, qs); err != nil {
				return err
			}
			mem[s], reused[s] = reg.MemoryReport(), r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return answered{}, err
	}
	var ans answered
	for s, qs := range byShard {
		if len(qs) > 0 {
			ans.calls++
			ans.reused = ans.reused || reused[s]
			ans.mem = append(ans.mem, mem[s])
		}
	}
	return ans, nil
}

// checkContext checks the context's shape and targets; it returns the
// feature count.
func checkContext(X [][]float64, y []float64) (int, error) {
	if len(X) == 0 {
		return 0, errors.New("empty context: need at least one row")
	}
	f := len(X[0])
	if f == 0 {
		return 0, errors.New("context rows have no features")
	}
	if len(y) != len(X) {
		return 0, fmt.Errorf("%d context rows but %d targets", len(X), len(y))
	}
	for i, row := range X {
		if len(row) != f {
			return 0, fmt.Errorf("context row %d has %d features, row 0 %d", i, len(row), f)
		}
		if math.IsNaN(y[i]) || math.IsInf(y[i], 0) {
			return 0, fmt.Errorf("context row %d has a non-finite target", i)
		}
	}
	return f, nil
}
