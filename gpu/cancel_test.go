package gpu

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// countdownCtx is a context that ends after its Err has been asked a given
// number of times: a deterministic way to end a context at every depth of
// the engine's work, not only where a timer happens to fall.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func newCountdown(calls int64) *countdownCtx {
	c := &countdownCtx{Context: context.Background()}
	c.left.Store(calls)
	return c
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestFitStopsWhenContextEnds ends Fit's context after 1, 10, 100, … checks:
// wherever it ends, Fit returns an error wrapping context.Canceled and the
// regressor stays unfitted. 150 rows take model-4l's k-fold readout, 600
// its leave-one-out one.
func TestFitStopsWhenContextEnds(t *testing.T) {
	for _, tc := range []struct {
		model string
		rows  int
	}{{"regressd/model-2l", 600}, {DefaultModel, 600}, {DefaultModel, 150}} {
		model := tc.model
		X, y := synth(tc.rows, 4, 31)
		for _, calls := range []int64{0, 1, 10, 100, 1000} {
			r, err := NewRegressor(model)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Fit(newCountdown(calls), X, y)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s, context ending after %d checks: Fit err = %v, want context.Canceled", model, calls, err)
			}
			if _, err := r.Predict(context.Background(), X[:3]); !errors.Is(err, ErrNotFitted) {
				t.Fatalf("%s: predict after a stopped Fit: err = %v, want ErrNotFitted", model, err)
			}
		}
	}
}

// TestPredictStopsWhenContextEnds does the same for Predict, cached and
// not, and checks that a stopped cache build leaves nothing behind: the
// next Predict builds its cache afresh and gives the same bits as a
// regressor that was never interrupted.
func TestPredictStopsWhenContextEnds(t *testing.T) {
	X, y := synth(500, 4, 32)
	Xq, _ := synth(200, 4, 33)
	ref := mustPredict(t, mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(64)), Xq)
	for _, calls := range []int64{0, 1, 5, 20, 100} {
		dev := NewCPUDevice(0)
		r := mustFit(t, "regressd/model-2l", X, y, WithQueryBatch(64), WithDevice(dev))
		if _, err := r.Predict(newCountdown(calls), Xq); !errors.Is(err, context.Canceled) {
			t.Fatalf("context ending after %d checks: Predict err = %v, want context.Canceled", calls, err)
		}
		if r.cache != nil {
			t.Fatalf("context ending after %d checks: a cache was kept", calls)
		}
		if dev.Used() != 0 {
			t.Fatalf("context ending after %d checks: %d bytes of device memory still held", calls, dev.Used())
		}
		sameBits(t, "after a stopped predict", ref, mustPredict(t, r, Xq))
	}
}

// TestFitStopsPromptly cancels a Fit that takes seconds shortly after it
// starts; it must return the context's error, not finish the fit.
func TestFitStopsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a large fit")
	}
	X, y := synth(20000, 8, 34)
	r, err := NewRegressor(DefaultModel)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.Fit(ctx, X, y); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fit err = %v, want context.DeadlineExceeded", err)
	}
}
