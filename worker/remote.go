package worker

import (
	"context"
	"errors"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/metrics"
)

// Remote predicts through a hosted gateway that speaks POST /predict: ours
// (regressd gateway) or the vendor's. Every batch re-sends the context, as
// the wire format requires; the context still crosses the bus only once.
type Remote struct {
	url string
	// Metrics counts the calls by outcome; nil counts nothing.
	Metrics *metrics.Metrics
}

var _ Predictor = (*Remote)(nil)

// NewRemote checks the gateway URL (https, except on loopback).
func NewRemote(url string) (*Remote, error) {
	if _, err := gateway.NewClient(url, "check", "check/check"); err != nil {
		return nil, err
	}
	return &Remote{url: url}, nil
}

// Predict makes one call to the gateway with the task's key and timeout.
// It does not retry: the worker attempts a batch again (max_retries times
// in all, across deliveries), so that max_retries bounds the calls a batch
// costs. A model scaled to zero answers its 503s like any 5xx.
func (r *Remote) Predict(ctx context.Context, req Request) ([]float64, error) {
	c, err := r.client(req)
	if err != nil {
		return nil, err
	}
	ans, err := c.Predict(ctx, req.X, req.Y, req.Xq, nil)
	r.Metrics.GatewayCall(gatewayOutcome(ctx, err))
	if err != nil {
		if gateway.IsTransient(err) {
			return nil, err // the gateway's errors already say "gateway:"
		}
		return nil, Final(err)
	}
	return ans.Predictions, nil
}

// client is the request's gateway client: its key and timeout, one
// attempt.
func (r *Remote) client(req Request) (*gateway.Client, error) {
	if req.Key == "" {
		return nil, Final(errors.New("no model-service key: send X-Service-Api-Key, or set SERVICE_API_KEY in the scheduler's environment for scheduled runs"))
	}
	opts := []gateway.ClientOption{gateway.WithMaxRetries(0), gateway.WithColdStartWait(0)}
	if req.Timeout > 0 {
		opts = append(opts, gateway.WithRequestTimeout(req.Timeout))
	}
	c, err := gateway.NewClient(r.url, req.Key, req.Model, opts...)
	if err != nil {
		return nil, Final(err)
	}
	return c, nil
}
