package schemas

import "time"

// Run is one task as the writer's ledger records it, as the admin API's
// run endpoints (GET /api/v3/runs…) answer it.
type Run struct {
	TaskID  string `json:"task_id"`
	Trigger string `json:"trigger"`
	// Status is running, success, partial, skipped, dry_run or failed.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// FirstFailure is the first failed batch's message, when one failed.
	FirstFailure string `json:"first_failure,omitempty"`
	Code         int    `json:"code,omitempty"`
	// Origin is webhook, schedule or replay.
	Origin          string    `json:"origin"`
	DryRun          bool      `json:"dry_run"`
	Measurement     string    `json:"measurement"`
	Target          string    `json:"target"`
	Model           string    `json:"model"`
	Start           time.Time `json:"window_start"`
	End             time.Time `json:"window_end"`
	Batches         int       `json:"batches"`
	BatchesDone     int       `json:"batches_done"`
	BatchesFailed   int       `json:"batches_failed"`
	Written         int64     `json:"written"`
	Remaining       int64     `json:"remaining"`
	ContextRows     int       `json:"context_rows"`
	QueryRows       int       `json:"query_rows"`
	ReadRows        int       `json:"read_rows"`
	ReadTruncated   bool      `json:"read_truncated"`
	SkippedExisting int       `json:"skipped_existing"`
	// OutsideRange counts the predicted query rows outside the context's
	// range (TaskSummary.OutsideRange).
	OutsideRange int `json:"outside_range"`
	// Created is when the ledger first heard of the task (its first
	// result), Updated its last change.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// RunBatch is one batch of a run as the ledger records it; batch -1 is a
// verdict (the producer ended the task without batches).
type RunBatch struct {
	Batch     int       `json:"batch"`
	Status    string    `json:"status"`
	Rows      int       `json:"rows"`
	Written   int       `json:"written"`
	Message   string    `json:"message,omitempty"`
	Code      int       `json:"code,omitempty"`
	Committed time.Time `json:"committed"`
}

// ObservedPoint is a row of a measurement's target over time; Value is nil
// where the target is empty (a gap).
type ObservedPoint struct {
	Time  time.Time `json:"time"`
	Value *float64  `json:"value"`
}

// FilledPoint is a prediction in <measurement>_regressed. P10 and P90 are
// set only when the table has p10/p90 columns and the row has them.
type FilledPoint struct {
	Time  time.Time `json:"time"`
	Value float64   `json:"value"`
	Model string    `json:"model"`
	P10   *float64  `json:"p10,omitempty"`
	P90   *float64  `json:"p90,omitempty"`
}
