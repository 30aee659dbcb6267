// Package engine times the built-in engine's phases — Fit, the KV cache
// build and Predict — on generated tables, beside a reference engine built
// from git (testdata/refdriver) on the same data in the same run, so that
// every speedup is a ratio measured side by side ('regressd bench engine').
package engine

import (
	"math"
	"syscall"
	"time"

	"github.com/regressd/regressd/gpu/largectx/largectxtest"
)

// Engine is what a side of the benchmark times: this tree's engine or the
// reference build's, behind the same calls.
type Engine interface {
	Fit(X [][]float64, y []float64) error
	Predict(Xq [][]float64) ([]float64, error)
	// CacheBytes is the KV cache the last Predict read (0: none).
	CacheBytes() int64
	Close()
}

// Phase is one timed call: wall and CPU seconds (user + system, the whole
// process: CPU / wall is the cores it kept busy).
type Phase struct {
	Wall float64 `json:"wall_s"`
	CPU  float64 `json:"cpu_s"`
}

// Timing is one side's measurement of one cell.
type Timing struct {
	Fit Phase `json:"fit"`
	// Predict is the first Predict after Fit, the call /predict makes.
	Predict Phase `json:"predict"`
	// Cache is the KV cache build: the first Predict that holds a cache
	// less a Predict that reuses it (Warm).
	Cache Phase `json:"cache"`
	// Warm is a Predict that reuses the built cache.
	Warm Phase `json:"warm"`
	// Whole is Fit plus the first Predict.
	Whole Phase `json:"whole"`
	// CacheCall is the Predict (1 or 2) that built the cache; 0: none.
	CacheCall int     `json:"cache_call"`
	R2        float64 `json:"r2"`
	// Preds of the first Predict, for the agreement of the two sides.
	Preds []float64 `json:"preds,omitempty"`
}

// Data is the generated table of a cell: the same function and seeds on
// both sides.
func Data(rows, queries, features int) (X [][]float64, y []float64, Xq [][]float64, yq []float64) {
	X, y = largectxtest.Smooth(rows, features, 1)
	Xq, yq = largectxtest.Smooth(queries, features, 2)
	return
}

// Measure fits e on (X, y) and predicts Xq three times: the first call
// (what /predict costs after Fit), a second (which builds the cache when the
// first did not, as the worker's second batch does) and a third that
// reuses it.
func Measure(e Engine, X [][]float64, y []float64, Xq [][]float64, yq []float64) (Timing, error) {
	var t Timing
	var err error
	t.Fit, err = timed(func() error { return e.Fit(X, y) })
	if err != nil {
		return t, err
	}
	var preds []float64
	calls := make([]Phase, 3)
	cached := make([]bool, 3)
	for i := range calls {
		calls[i], err = timed(func() error {
			p, err := e.Predict(Xq)
			if i == 0 {
				preds = p
			}
			return err
		})
		if err != nil {
			return t, err
		}
		cached[i] = e.CacheBytes() > 0
	}
	t.Predict, t.Warm = calls[0], calls[2]
	build := calls[1]
	if cached[0] {
		build = calls[0]
	}
	switch {
	case cached[0]:
		t.CacheCall = 1
	case cached[1]:
		t.CacheCall = 2
	}
	if t.CacheCall > 0 {
		t.Cache = Phase{Wall: math.Max(build.Wall-t.Warm.Wall, 0), CPU: math.Max(build.CPU-t.Warm.CPU, 0)}
	}
	t.Whole = Phase{Wall: t.Fit.Wall + t.Predict.Wall, CPU: t.Fit.CPU + t.Predict.CPU}
	t.R2 = r2(yq, preds)
	t.Preds = preds
	return t, nil
}

func timed(fn func() error) (Phase, error) {
	cpu0, start := cpuSeconds(), time.Now()
	err := fn()
	return Phase{Wall: time.Since(start).Seconds(), CPU: cpuSeconds() - cpu0}, err
}

// cpuSeconds is the CPU time this process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// r2 is the coefficient of determination of pred against truth.
func r2(truth, pred []float64) float64 {
	if len(truth) == 0 || len(pred) != len(truth) {
		return math.NaN()
	}
	var mean float64
	for _, v := range truth {
		mean += v
	}
	mean /= float64(len(truth))
	var ss, sr float64
	for i, v := range truth {
		ss += (v - mean) * (v - mean)
		sr += (v - pred[i]) * (v - pred[i])
	}
	return 1 - sr/ss
}
