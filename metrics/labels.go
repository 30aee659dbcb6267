package metrics

import "slices"

// Every label value comes from one of these sets; bound maps anything else
// to "other", so a caller's mistake cannot grow a series per task.

// Other is the value a label takes for anything outside its set.
const Other = "other"

// Stage names a timed step of a task (label "stage" of
// regressd_stage_duration_seconds).
type Stage string

// Stages timed.
const (
	StageProducerRead  Stage = "producer_read"  // reading a task's window from PostgreSQL
	StageEngineFit     Stage = "engine_fit"     // building the model's context (KV cache) for a task
	StageEnginePredict Stage = "engine_predict" // predicting one batch of query rows
	StageWriterCommit  Stage = "writer_commit"  // the transaction that writes predictions and ledger rows
)

func stages() []string {
	return []string{string(StageProducerRead), string(StageEngineFit), string(StageEnginePredict), string(StageWriterCommit)}
}

// Task statuses counted (label "status" of regressd_tasks_total); the
// values match the engine endpoint's task statuses.
func taskStatuses() []string { return []string{"success", "partial", "failed", "skipped", "dry_run"} }

// Outcome is how a call to a hosted /predict gateway ended (label "outcome"
// of regressd_gateway_calls_total and regressd_gateway_retries_total).
type Outcome string

// Outcomes of a gateway call attempt.
const (
	OutcomeSuccess     Outcome = "success"      // 2xx with usable predictions
	OutcomeClientError Outcome = "client_error" // 4xx other than 429: the request's fault, not retried
	OutcomeRateLimited Outcome = "rate_limited" // 429
	OutcomeServerError Outcome = "server_error" // 5xx
	OutcomeColdStart   Outcome = "cold_start"   // the gateway said its model is still starting
	OutcomeTimeout     Outcome = "timeout"      // no answer within the request timeout
	OutcomeTransport   Outcome = "transport"    // connection refused, reset, DNS
	OutcomeBadResponse Outcome = "bad_response" // an answer that could not be used
	OutcomeCanceled    Outcome = "canceled"     // the caller gave up (shutdown, deadline)
)

func outcomes() []string {
	return []string{string(OutcomeSuccess), string(OutcomeClientError), string(OutcomeRateLimited),
		string(OutcomeServerError), string(OutcomeColdStart), string(OutcomeTimeout), string(OutcomeTransport),
		string(OutcomeBadResponse), string(OutcomeCanceled)}
}

// OutcomeOfStatus classifies an HTTP status a gateway answered with.
func OutcomeOfStatus(code int) Outcome {
	switch {
	case code >= 200 && code < 300:
		return OutcomeSuccess
	case code == 429:
		return OutcomeRateLimited
	case code >= 500:
		return OutcomeServerError
	default:
		return OutcomeClientError
	}
}

// Reason is why a message was dead-lettered (label "reason" of
// regressd_dead_letters_total): a class, never the error's text.
type Reason string

// Dead-letter reasons.
const (
	ReasonPermanent     Reason = "permanent"      // the handler said retrying cannot help (bad data)
	ReasonSchemaVersion Reason = "schema_version" // a message of another schema version
	ReasonPanic         Reason = "panic"          // the handler panicked
	ReasonGaveUp        Reason = "gave_up"        // the handler failed at its last delivery
	ReasonMaxDeliveries Reason = "max_deliveries" // the server's MAX_DELIVERIES advisory: a process crashed or hung on it every time
)

func reasons() []string {
	return []string{string(ReasonPermanent), string(ReasonSchemaVersion), string(ReasonPanic),
		string(ReasonGaveUp), string(ReasonMaxDeliveries)}
}

// workStreams are the streams whose messages are dead-lettered (label
// "stream" of regressd_dead_letters_total).
func workStreams() []string { return []string{"REGRESS_JOBS", "REGRESS_BATCHES", "REGRESS_RESULTS"} }

// Breaker states (label "state" of regressd_breaker_state), as gobreaker's
// State.String() spells them but with '_' for '-'.
func breakerStates() []string { return []string{"closed", "half_open", "open"} }

// KV-cache rungs of the engine's memory ladder (label "rung"); they match
// the gpu package's Rung constants (TestRungsMatchEngine).
func rungs() []string {
	return []string{"no_cache", "resident_bf16", "resident_int8", "offload_bf16", "offload_int8",
		"stream_bf16", "stream_int8", "context_row_chunk", "plain_loop"}
}

// HTTP servers of a process (label "server" of regressd_http_requests_total).
const (
	ServerAPI     = "api"     // --http-addr: engine endpoint, admin API, health
	ServerGateway = "gateway" // --gateway-addr: POST /predict
)

func servers() []string { return []string{ServerAPI, ServerGateway} }

// bound returns v when set holds it, else Other.
func bound(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return Other
}
