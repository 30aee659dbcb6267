package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/regressd/regressd/gpu"
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

// newEngineObserved is newEngineOn recording its fits and predictions in m.
func newEngineObserved(dev gpu.Device, hostBytes int64, m *metrics.Metrics) predictFunc {
	return func(ctx context.Context, req engineRequest) ([]float64, json.RawMessage, error) {
		preds, rep, err := predictOn(ctx, dev, hostBytes, req, m)
		if errors.Is(err, gpu.ErrOutOfMemory) && dev.Used() > 0 {
			// This request's own memory is released (predictOn closed its
			// Regressor); what is still held belongs to others.
			err = fmt.Errorf("%w; %w", err, errArenaShared)
		}
		return preds, rep, err
	}
}

// predictOn fits and predicts one request on dev; both stop when ctx ends.
func predictOn(ctx context.Context, dev gpu.Device, hostBytes int64, req engineRequest, m *metrics.Metrics) ([]float64, json.RawMessage, error) {
	opts := []gpu.Option{gpu.WithDevice(dev), gpu.WithHostMemory(hostBytes)}
	// A thinking model takes no policy at all (the server has refused
	// one sent with it); every other model gets the resolved, clamped one.
	if info, _ := gpu.LookupModel(req.Model); !info.Thinking {
		opts = append(opts, gpu.WithPolicy(req.Policy))
	}
	r, err := gpu.NewRegressor(req.Model, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	defer m.EngineCall()()
	fitted := m.Time(metrics.StageEngineFit)
	if err := r.Fit(ctx, req.X, req.Y); err != nil {
		return nil, nil, err
	}
	fitted()
	predicted := m.Time(metrics.StageEnginePredict)
	preds, err := r.Predict(ctx, req.Xq)
	if err != nil {
		return nil, nil, err
	}
	predicted()
	rep := r.MemoryReport()
	m.ObserveRung(rep.Rung)
	rep.Clamped, rep.Notes = nil, nil // the server adds its own
	b, err := json.Marshal(rep)
	return preds, b, err
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
			"%v; allow adaptive_query_chunk, raise the budgets or send a shorter context", err)}
	case errors.Is(err, gpu.ErrInvalidPolicy), errors.Is(err, gpu.ErrThinkingPolicy):
		return &badRequest{status: http.StatusBadRequest, msg: err.Error()}
	case errors.Is(err, gpu.ErrUnknownModel):
		return &badRequest{status: http.StatusNotFound, msg: err.Error()}
	}
	return err
}
