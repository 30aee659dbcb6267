package gpu

// Rungs of the memory ladder, reported in MemoryReport.Rung.
const (
	RungNoCache         = "no_cache"
	RungResidentBF16    = "resident_bf16"
	RungResidentInt8    = "resident_int8"
	RungOffloadBF16     = "offload_bf16"
	RungOffloadInt8     = "offload_int8"
	RungStreamBF16      = "stream_bf16"
	RungStreamInt8      = "stream_int8"
	RungContextRowChunk = "context_row_chunk"
	RungPlainLoop       = "plain_loop"
)

// MemoryReport says how the last Predict held the context (the seed's memory
// report): the resolved policy plus what the ladder chose.
type MemoryReport struct {
	// Policy is the resolved memory policy; its fields appear at the top
	// level of the JSON form, beside the report's own.
	Policy
	// Rung is the ladder step that ran.
	Rung string `json:"rung"`
	// EstCacheGB is the full-precision (bf16) cache size for this context:
	// layers × groups × rows × 2 × E × 2 bytes, in GiB.
	EstCacheGB float64 `json:"est_cache_gb"`
	// ResidentGB is the cache held in device memory, GiB; 0 when offloaded
	// or uncached.
	ResidentGB float64 `json:"resident_gb"`
	// QueryChunk is the number of query rows per forward pass.
	QueryChunk int `json:"query_chunk"`
	// DroppedContextRows counts context rows discarded to fit.
	DroppedContextRows int `json:"dropped_context_rows"`
	// CacheBytes is the cache actually allocated, in bytes (0 uncached).
	CacheBytes int64 `json:"cache_bytes"`
	// Attempts are the ladder's tries at holding the context, in order,
	// the last one the rung that ran. The hosted server writes them as
	// attempt_history in its own form, so they have no JSON name here.
	Attempts []Attempt `json:"-"`
	// Clamped and Notes are set by the hosted server only.
	Clamped []string `json:"clamped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// gib converts bytes to GiB.
func gib(b int64) float64 { return float64(b) / (1 << 30) }

// Outcomes of an Attempt.
const (
	OutcomeSuccess     = "success"
	OutcomeOOM         = "oom"
	OutcomeUnsupported = "unsupported"
)

// Reasons an Attempt was made.
const (
	// ReasonResolved: the policy and the budgets chose this rung first.
	ReasonResolved = "resolved"
	// ReasonOOMRetry: the same rung again, in smaller row chunks or
	// slices, after an out-of-memory error.
	ReasonOOMRetry = "oom_retry"
	// ReasonFallbackAfterOOM: the next rung down after an out-of-memory
	// error.
	ReasonFallbackAfterOOM = "fallback_after_oom"
	// ReasonFallbackAfterUnsupported: the next rung down after one this
	// device cannot run (the CPU device runs every rung, so the engine
	// never reports it today).
	ReasonFallbackAfterUnsupported = "fallback_after_unsupported"
)

// Attempt is one try of the memory ladder at holding the context for a
// Predict call. Rungs the budgets rule out are skipped, not attempted.
type Attempt struct {
	// Rung is the rung tried (a Rung constant).
	Rung string
	// CacheDType is the cache's precision ("bf16" or "int8"); "" uncached.
	CacheDType string
	// Tier is where the cache lives: "device", "host", or "" uncached.
	Tier string
	// ContextRowChunk is the context rows per GP expert of a row-chunked
	// build (rung context_row_chunk), or per staged slice of a stream
	// rung; 0 when the context is taken whole.
	ContextRowChunk int
	// QueryChunk is the query rows per forward pass of the Predict call.
	QueryChunk int
	// Outcome is OutcomeSuccess, OutcomeOOM or OutcomeUnsupported.
	Outcome string
	// Reason says why the attempt was made (a Reason constant).
	Reason string
	// Err is the error a failed attempt met; "" on success.
	Err string
}
