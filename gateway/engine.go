package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/metrics"
)

// newEngine returns the built-in engine as a predictFunc. All requests share
// one device, as they would share one card: its arena is the device memory
// the ladder plans against, so concurrent predictions see each other's
// caches. Each request gets its own Regressor, closed (its cache freed)
// before the answer is written.
func newEngine(deviceBytes, hostBytes int64, m *metrics.Metrics) predictFunc {
	return newEngineObserved(gpu.NewCPUDevice(deviceBytes), hostBytes, m)
}

// errArenaShared marks an out-of-memory error met while other predictions
// held part of the device: the same request may well fit once they finish.
var errArenaShared = errors.New("other predictions held part of the device memory at the time")

// newEngineOn is newEngine on a given device.
func newEngineOn(dev gpu.Device, hostBytes int64) predictFunc {
	return newEngineObserved(dev, hostBytes, nil)
}

// newEngineObserved is newEngineOn recording its fits and predictions in
// obs (nil: nowhere).
func newEngineObserved(dev gpu.Device, hostBytes int64, obs *metrics.Metrics) predictFunc {
	return func(ctx context.Context, req engineRequest) (*engineResult, error) {
		res, err := predictOn(ctx, dev, hostBytes, req, obs)
		if errors.Is(err, gpu.ErrOutOfMemory) && dev.Used() > 0 {
			// This request's own memory is released (predictOn closed its
			// regressors); what is still held belongs to others.
			err = fmt.Errorf("%w; %w", err, errArenaShared)
		}
		return res, err
	}
}

// engineResult is what the engine answered for one request.
type engineResult struct {
	Mean, Median []float64 // Median nil unless asked
	// Quantiles[q][k] is query q's quantile at Taus[k]; nil unless asked.
	Quantiles [][]float64
	Taus      []float64
	// Memory is the engine's memory report.
	Memory gpu.MemoryReport
	// Large is what the large-context policy did.
	Large largectx.Report
}

// predictOn fits and predicts one request on dev, through the large-context
// router (which, without a policy or below its threshold, fits the one
// context whole); all of it stops when ctx ends.
func predictOn(ctx context.Context, dev gpu.Device, hostBytes int64, req engineRequest, obs *metrics.Metrics) (*engineResult, error) {
	opts := []gpu.Option{gpu.WithDevice(dev), gpu.WithHostMemory(hostBytes)}
	// A thinking model takes no policy at all (the server has refused
	// one sent with it); every other model gets the resolved, clamped one.
	if info, _ := gpu.LookupModel(req.Model); !info.Thinking {
		opts = append(opts, gpu.WithPolicy(req.Policy))
	}
	newReg := func() (*gpu.Regressor, error) { return gpu.NewRegressor(req.Model, opts...) }
	defer obs.EngineCall()()
	fitted := obs.Time(metrics.StageEngineFit)
	m, err := largectx.Fit(ctx, req.Large, newReg, req.X, req.Y)
	if err != nil {
		return nil, err
	}
	fitted()
	defer m.Close()
	nq := len(req.Xq)
	res := &engineResult{Mean: make([]float64, nq)}
	detailed := req.Median || req.Taus != nil
	if req.Median {
		res.Median = make([]float64, nq)
	}
	if req.Taus != nil {
		res.Taus = req.Taus
		res.Quantiles = make([][]float64, nq)
	}
	ask := func(ctx context.Context, reg *gpu.Regressor, rows [][]float64, idx []int) error {
		if !detailed {
			p, err := reg.Predict(ctx, rows)
			if err != nil {
				return err
			}
			for a, q := range idx {
				res.Mean[q] = p[a]
			}
			return nil
		}
		p, err := reg.PredictDetailed(ctx, rows, gpu.PredictOptions{Quantiles: req.Taus})
		if err != nil {
			return err
		}
		for a, q := range idx {
			res.Mean[q] = p.Mean[a]
			if res.Median != nil {
				res.Median[q] = p.Median[a]
			}
			if res.Quantiles != nil {
				res.Quantiles[q] = p.Quantiles[a]
			}
		}
		return nil
	}
	predicted := obs.Time(metrics.StageEnginePredict)
	if res.Large, err = m.Answer(ctx, req.Xq, ask); err != nil {
		return nil, err
	}
	predicted()
	res.Memory = mergeMemory(res.Large.Memory, req.Policy)
	obs.ObserveRung(res.Memory.Rung)
	return res, nil
}

// mergeMemory is one memory report for the internal calls of a request:
// the first call's, with the context rows every call dropped added up.
func mergeMemory(reps []gpu.MemoryReport, p gpu.Policy) gpu.MemoryReport {
	var out gpu.MemoryReport
	found := false
	dropped := 0
	for _, r := range reps {
		if r.Rung == "" {
			continue
		}
		if !found {
			out, found = r, true
		}
		dropped += r.DroppedContextRows
	}
	if !found {
		out = gpu.MemoryReport{Policy: p, Rung: gpu.RungNoCache}
	}
	out.DroppedContextRows = dropped
	out.Clamped, out.Notes = nil, nil // the server adds its own
	return out
}

// engineError maps the engine's caller errors to statuses; anything else is
// the server's fault (500).
//
// A context too large for the policy (allow_subsample=false) is 422: the
// request is well formed but cannot be served as asked, and a smaller body,
// which 413 would suggest, is not the fix; a different policy or a shorter
// context is. Running out of device memory with no smaller step allowed
// (adaptive_query_chunk=false, or one query row that still does not fit) is
// 422 for the same reason — unless other predictions held part of the
// device at the time: then it is 503 with Retry-After, as the request may
// fit once they finish.
func engineError(err error) error {
	switch {
	case errors.Is(err, errArenaShared):
		return &badRequest{status: http.StatusServiceUnavailable, retryAfter: 2, msg: fmt.Sprintf(
			"%v; retry shortly", err)}
	case errors.Is(err, gpu.ErrContextTooLarge):
		return &badRequest{status: http.StatusUnprocessableEntity, msg: err.Error()}
	case errors.Is(err, gpu.ErrOutOfMemory):
		return &badRequest{status: http.StatusUnprocessableEntity, msg: fmt.Sprintf(
			"%v; raise the device memory or the policy's budgets, allow adaptive_query_chunk if it is off, or send a shorter context", err)}
	case errors.Is(err, gpu.ErrInvalidPolicy), errors.Is(err, gpu.ErrThinkingPolicy),
		errors.Is(err, largectx.ErrThinkingModel), errors.Is(err, largectx.ErrInvalid), errors.Is(err, gpu.ErrBadQuantiles):
		return &badRequest{status: http.StatusBadRequest, msg: err.Error()}
	case errors.Is(err, gpu.ErrUnknownModel):
		return &badRequest{status: http.StatusNotFound, msg: err.Error()}
	}
	return err
}
