package largectx

import (
	"sync/atomic"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/eval"
	"github.com/regressd/regressd/gpu/largectx/largectxtest"
)

var (
	regions = largectxtest.Regions
	smooth  = largectxtest.Smooth
	r2      = eval.R2
)

// fast is the model the tests' windows are fitted with.
const fast = "regressd/model-2l"

// engine makes the tests' internal regressors.
func engine() (*gpu.Regressor, error) { return gpu.NewRegressor(fast) }

// counting returns a NewRegressor of the fast model and the count of
// regressors it has made (windows fitted, plus Fit's model check).
func counting() (NewRegressor, *atomic.Int64) {
	var n atomic.Int64
	return func() (*gpu.Regressor, error) {
		n.Add(1)
		return engine()
	}, &n
}
