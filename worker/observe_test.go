package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/metrics"
)

func TestGatewayOutcome(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want metrics.Outcome
	}{
		{live, nil, metrics.OutcomeSuccess},
		{live, &gateway.HTTPError{Status: 429}, metrics.OutcomeRateLimited},
		{live, fmt.Errorf("call: %w", &gateway.HTTPError{Status: 502}), metrics.OutcomeServerError},
		{live, &gateway.HTTPError{Status: 503, ColdStart: true}, metrics.OutcomeColdStart},
		{live, &gateway.HTTPError{Status: 403}, metrics.OutcomeClientError},
		{live, fmt.Errorf("x: %w", gateway.ErrBadResponse), metrics.OutcomeBadResponse},
		{live, fmt.Errorf("attempt: %w", context.DeadlineExceeded), metrics.OutcomeTimeout},
		{gone, errors.New("whatever"), metrics.OutcomeCanceled},
	} {
		if got := gatewayOutcome(c.ctx, c.err); got != c.want {
			t.Errorf("gatewayOutcome(%v) = %s, want %s", c.err, got, c.want)
		}
	}
	if n := predicted([]float64{1, math.NaN(), 3}); n != 2 {
		t.Errorf("predicted = %d, want 2", n)
	}
}
