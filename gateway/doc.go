// Package gateway owns the hosted prediction API: the POST /predict server
// (keys, rate limits, bounded concurrency, usage metering in PostgreSQL, the
// memory report with clamped and notes) and the Go client that calls any
// gateway speaking /predict, with the retry rules of the hosted service.
// It knows nothing of triggers, NATS or the pipeline.
package gateway
