// Package worker consumes query batches, predicts them with a Predictor (the
// built-in engine in-process, or a hosted gateway) behind a circuit breaker,
// and publishes the results. It never writes tables.
package worker
