package gpu

import (
	"errors"
	"fmt"
	"math"
)

// ErrUnknownModel is returned by NewRegressor for a slug that is not built in.
var ErrUnknownModel = errors.New("unknown model")

// ModelInfo describes one built-in model.
type ModelInfo struct {
	Slug        string
	Description string
	Thinking    bool
}

// Models lists the built-in models.
func Models() []ModelInfo {
	return []ModelInfo{
		{Slug: "regressd/model-small", Description: "placeholder kernel smoother"},
	}
}

// LookupModel returns the built-in model with this slug.
func LookupModel(slug string) (ModelInfo, bool) {
	for _, m := range Models() {
		if m.Slug == slug {
			return m, true
		}
	}
	return ModelInfo{}, false
}

// Option configures a Regressor.
type Option func(*Regressor) error

// Regressor is a local in-context regressor: Fit stores the context, Predict
// answers queries against it. A Regressor is not safe for concurrent Fit; Predict
// may be called concurrently after Fit.
type Regressor struct {
	model ModelInfo
	x     [][]float64
	y     []float64
}

// NewRegressor returns a regressor for a built-in model slug.
func NewRegressor(model string, opts ...Option) (*Regressor, error) {
	m, ok := LookupModel(model)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownModel, model)
	}
	r := &Regressor{model: m}
	for _, o := range opts {
		if err := o(r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Fit sets the context. NaN cells are missing values.
func (r *Regressor) Fit(X [][]float64, y []float64) error {
	if len(X) == 0 {
		return errors.New("empty context")
	}
	if len(X) != len(y) {
		return fmt.Errorf("context has %d rows but %d targets", len(X), len(y))
	}
	r.x, r.y = X, y
	return nil
}

// Predict returns one prediction per query row.
func (r *Regressor) Predict(Xq [][]float64) ([]float64, error) {
	if r.x == nil {
		return nil, errors.New("predict before fit")
	}
	out := make([]float64, len(Xq))
	for i, q := range Xq {
		var num, den float64
		for j, c := range r.x {
			var d float64
			for k := range q {
				if k < len(c) && !math.IsNaN(q[k]) && !math.IsNaN(c[k]) {
					d += (q[k] - c[k]) * (q[k] - c[k])
				}
			}
			w := math.Exp(-d)
			num += w * r.y[j]
			den += w
		}
		if den == 0 {
			out[i] = mean(r.y)
		} else {
			out[i] = num / den
		}
	}
	return out, nil
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
