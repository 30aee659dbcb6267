package schemas

import (
	"strings"
	"time"
)

// BucketStatus is the KV bucket where roles publish their live state for
// the status page: each worker its circuit breaker. Entries expire StatusTTL
// after their last put, so a worker that stopped or died drops out.
const BucketStatus = "regress_status"

// Status timing: a worker puts its state on every change and at least every
// StatusInterval; an entry StatusTTL old is gone.
const (
	StatusInterval = 10 * time.Second
	StatusTTL      = 30 * time.Second
)

// Breaker states as WorkerStatus reports them (gobreaker's names).
const (
	BreakerClosed   = "closed"
	BreakerHalfOpen = "half-open"
	BreakerOpen     = "open"
)

// WorkerStatus is a worker's entry in BucketStatus, as JSON.
type WorkerStatus struct {
	// Worker names the process: host and pid unless configured.
	Worker string `json:"worker"`
	// Breaker is the circuit breaker's state: closed, half-open or open.
	Breaker string `json:"breaker"`
	// Predictor is "local" (built-in engine) or "remote" (a gateway).
	Predictor string    `json:"predictor,omitempty"`
	Updated   time.Time `json:"updated"`
}

// WorkerStatusPrefix starts the key of every worker's entry.
const WorkerStatusPrefix = "worker."

// WorkerStatusKey is a worker's key in BucketStatus; characters a KV key
// may not hold become '_'.
func WorkerStatusKey(worker string) string {
	return WorkerStatusPrefix + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			return r
		}
		return '_'
	}, worker)
}
