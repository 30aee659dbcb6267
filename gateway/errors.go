package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// HTTPError is a non-200 answer from a gateway (or a 200 that could not be
// used; see ErrBadResponse).
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the gateway's own message (its "error", "message" or
	// "detail" field), or the start of a non-JSON body.
	Message string
	// RetryAfter is the gateway's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// ColdStart is true for a 502/503/504 with a non-JSON body, or a JSON
	// 503 saying the model is loading or starting: the model is scaled to
	// zero and starting, which the client waits out.
	ColdStart bool
}

func (e *HTTPError) Error() string {
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = " (the gateway wants 'Authorization: Api-Key <key>')"
	case http.StatusForbidden:
		hint = " (the API key was refused: unknown, revoked, or not allowed this model)"
	case http.StatusNotFound:
		hint = " (the model is unknown to the gateway or not granted to this key)"
	case http.StatusTooManyRequests:
		hint = " (rate limited)"
	}
	if e.ColdStart {
		hint = " (model starting)"
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("gateway: HTTP %d%s: %s", e.Status, hint, msg)
}

// Errors of the client, matched with errors.Is.
var (
	// ErrNoMemoryReport: a memory_policy was sent and the answer has no
	// memory_report, so the gateway ignored the policy (an old server).
	ErrNoMemoryReport = errors.New("gateway ignored memory_policy: the response has no memory_report (the server predates memory policies)")
	// ErrBadResponse: a 200 answer that is not usable (not JSON, a wrong
	// number of predictions, a non-number prediction). The gateway is at
	// fault, not the request.
	ErrBadResponse = errors.New("gateway sent an unusable response")
)

// transportError is a failure to get an answer at all: a connection that
// could not be made or broke, or a per-request timeout.
type transportError struct {
	err     error
	timeout bool
}

func (e *transportError) Error() string {
	if e.timeout {
		return "gateway: no answer within the request timeout: " + e.err.Error()
	}
	return "gateway: connection failed: " + e.err.Error()
}

func (e *transportError) Unwrap() error { return e.err }

// IsTransient reports whether err means the gateway is unwell rather than
// the request wrong: connection failures, timeouts, 408, 409, 425, 429,
// 5xx and unusable 200s. A circuit breaker should count only these as
// failures; anything else (400, 401, 403, 404, 413, 422, a policy the server
// ignored) is the caller's to fix and retrying will not help. The caller's
// own context ending is not transient.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return retryableStatus(he.Status)
	}
	var te *transportError
	if errors.As(err, &te) {
		return true
	}
	if errors.Is(err, ErrBadResponse) {
		return true
	}
	return false
}

// retryableStatus is the hosted service's retry set.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500 && code <= 599
}

// isCallerDone reports whether ctx ending caused err.
func isCallerDone(ctx context.Context) bool { return ctx.Err() != nil }
