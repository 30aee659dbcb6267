package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/regressd/regressd/gpu"
)

// attempt is one entry of memory_report.attempt_history, the official
// client's newest report field.
type attempt struct {
	Path               string  `json:"path"` // pipeline_batch, cached or plain_loop
	Rung               string  `json:"rung"`
	CacheDType         *string `json:"cache_dtype"`
	OffloadToHost      bool    `json:"offload_to_host"`
	ContextRowChunk    *int    `json:"context_row_chunk"`
	QueryChunk         int     `json:"query_chunk"`
	Outcome            string  `json:"outcome"` // success, oom or unsupported
	Reason             string  `json:"reason"`  // resolved, oom_retry, fallback_after_oom, fallback_after_unsupported
	DroppedContextRows int     `json:"dropped_context_rows"`
}

// attemptOf describes the attempt that produced rep. The engine resolves
// its rung before it allocates and does not record the query-chunk halvings
// inside a pass, so a served request has one attempt, the one that
// succeeded.
func attemptOf(rep gpu.MemoryReport) attempt {
	a := attempt{Rung: rep.Rung, QueryChunk: rep.QueryChunk, Outcome: "success", Reason: "resolved", DroppedContextRows: rep.DroppedContextRows}
	switch {
	case rep.Rung == gpu.RungPlainLoop:
		a.Path = "plain_loop"
	case rep.Rung == gpu.RungNoCache || rep.Rung == "":
		a.Path = "pipeline_batch"
	default:
		a.Path = "cached"
	}
	for _, dt := range []string{gpu.CacheDTypeBF16, gpu.CacheDTypeInt8} {
		if strings.HasSuffix(rep.Rung, "_"+dt) {
			a.CacheDType = &dt
		}
	}
	a.OffloadToHost = strings.HasPrefix(rep.Rung, "offload_")
	if rep.Rung == gpu.RungContextRowChunk {
		n := 2048
		if rep.Policy.ContextRowChunk != nil {
			n = *rep.Policy.ContextRowChunk
		}
		a.ContextRowChunk = &n
	}
	return a
}

// memoryReportJSON is the memory_report object: the engine's report (the
// resolved policy's twelve fields and what the ladder chose), the two
// policy fields the gateway reads itself, the attempt history, and the
// hosted-only clamped and notes.
func memoryReportJSON(rep gpu.MemoryReport, sp servedPolicy, clamped, notes []string) (json.RawMessage, error) {
	rep.Clamped, rep.Notes = nil, nil
	base, err := json.Marshal(rep)
	if err != nil {
		return nil, err
	}
	base = bytes.TrimSpace(base)
	if len(base) < 2 || base[0] != '{' {
		return nil, fmt.Errorf("engine memory report is not a JSON object: %.60q", base)
	}
	if clamped == nil {
		clamped = []string{}
	}
	if notes == nil {
		notes = []string{}
	}
	extra, err := json.Marshal(struct {
		ReuseContextCache bool      `json:"reuse_context_cache"`
		StreamContext     bool      `json:"stream_context"`
		AttemptHistory    []attempt `json:"attempt_history"`
		Clamped           []string  `json:"clamped"`
		Notes             []string  `json:"notes"`
	}{sp.ReuseContextCache, sp.StreamContext, []attempt{attemptOf(rep)}, clamped, notes})
	if err != nil {
		return nil, err
	}
	inner := bytes.TrimSpace(base[1 : len(base)-1])
	var out bytes.Buffer
	out.WriteByte('{')
	if len(inner) > 0 {
		out.Write(inner)
		out.WriteByte(',')
	}
	out.Write(extra[1:])
	return out.Bytes(), nil
}
