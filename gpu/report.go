package gpu

// Rungs of the memory ladder, reported in MemoryReport.Rung.
const (
	RungNoCache         = "no_cache"
	RungResidentBF16    = "resident_bf16"
	RungResidentInt8    = "resident_int8"
	RungOffloadBF16     = "offload_bf16"
	RungOffloadInt8     = "offload_int8"
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
	// Clamped and Notes are set by the hosted server only.
	Clamped []string `json:"clamped,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// gib converts bytes to GiB.
func gib(b int64) float64 { return float64(b) / (1 << 30) }
