package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/regressd/regressd/gpu"
)

// newEngine returns the built-in engine as a predictFunc.
//
// TEMPORARY: the engine's policy, device and report API is being built; this
// adapter uses what exists and reports the resolved policy as no_cache.
func newEngine(deviceBytes, hostBytes int64) predictFunc {
	return func(req engineRequest) ([]float64, json.RawMessage, error) {
		r, err := gpu.NewRegressor(req.Model)
		if err != nil {
			return nil, nil, err
		}
		if err := r.Fit(req.X, req.Y); err != nil {
			return nil, nil, err
		}
		preds, err := r.Predict(req.Xq)
		if err != nil {
			return nil, nil, err
		}
		rep, err := json.Marshal(struct {
			gpu.Policy
			Rung string `json:"rung"`
		}{req.Policy, "no_cache"})
		return preds, rep, err
	}
}

// engineError maps the engine's caller errors to statuses.
func engineError(err error) error {
	switch {
	case errors.Is(err, gpu.ErrInvalidPolicy):
		return &badRequest{status: http.StatusBadRequest, msg: err.Error()}
	case errors.Is(err, gpu.ErrUnknownModel):
		return &badRequest{status: http.StatusNotFound, msg: err.Error()}
	}
	return err
}
