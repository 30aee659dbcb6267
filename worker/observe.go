package worker

// What the worker tells the metrics package: the gateway outcome of a call,
// the rows a batch predicted, and the engine's stages.

import (
	"context"
	"errors"
	"math"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/metrics"
)

// gatewayOutcome classifies how one call to a hosted gateway ended.
func gatewayOutcome(ctx context.Context, err error) metrics.Outcome {
	var he *gateway.HTTPError
	switch {
	case err == nil:
		return metrics.OutcomeSuccess
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return metrics.OutcomeCanceled
	case errors.As(err, &he) && he.ColdStart:
		return metrics.OutcomeColdStart
	case errors.As(err, &he):
		return metrics.OutcomeOfStatus(he.Status)
	case errors.Is(err, gateway.ErrBadResponse):
		return metrics.OutcomeBadResponse
	case errors.Is(err, context.DeadlineExceeded):
		return metrics.OutcomeTimeout
	case gateway.IsTransient(err):
		return metrics.OutcomeTransport
	}
	return metrics.OutcomeBadResponse
}

// predicted counts the rows given a value (NaN: none).
func predicted(preds []float64) int {
	n := 0
	for _, v := range preds {
		if !math.IsNaN(v) {
			n++
		}
	}
	return n
}
