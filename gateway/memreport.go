package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"

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

// attemptHistory maps the engine's ladder attempts, in order, to the
// official client's attempt entries. A report without attempts (none of
// the request's internal calls built anything) stands for one resolved
// attempt at its rung.
func attemptHistory(rep gpu.MemoryReport) []attempt {
	tried := rep.Attempts
	if len(tried) == 0 {
		tried = []gpu.Attempt{{Rung: rep.Rung, QueryChunk: rep.QueryChunk, Outcome: gpu.OutcomeSuccess, Reason: gpu.ReasonResolved}}
	}
	out := make([]attempt, 0, len(tried))
	for _, t := range tried {
		a := attempt{Rung: t.Rung, QueryChunk: t.QueryChunk, Outcome: t.Outcome, Reason: t.Reason,
			OffloadToHost: t.Tier == "host", DroppedContextRows: rep.DroppedContextRows}
		switch t.Rung {
		case gpu.RungPlainLoop:
			a.Path = "plain_loop"
		case gpu.RungNoCache, "":
			a.Path = "pipeline_batch"
		default:
			a.Path = "cached"
		}
		if t.CacheDType != "" {
			a.CacheDType = &t.CacheDType
		}
		if t.ContextRowChunk > 0 {
			a.ContextRowChunk = &t.ContextRowChunk
		}
		out = append(out, a)
	}
	return out
}

// memoryReportJSON is the memory_report object: the engine's report (the
// resolved policy's thirteen fields and what the ladder chose), the policy
// field the gateway reads itself, the attempt history, and the hosted-only
// clamped and notes.
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
		AttemptHistory    []attempt `json:"attempt_history"`
		Clamped           []string  `json:"clamped"`
		Notes             []string  `json:"notes"`
	}{sp.ReuseContextCache, attemptHistory(rep), clamped, notes})
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
