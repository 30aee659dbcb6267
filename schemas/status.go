package schemas

// Status is the state of a task, of one of its batches, or of a producer's
// verdict: one type, one constant per state, the same words on the wire
// (HeaderStatus), in the ledger and in the engine endpoint's answers.
type Status string

const (
	// StatusRunning: a task whose batches are not all written yet.
	StatusRunning Status = "running"
	// StatusSuccess: a task whose every batch was written.
	StatusSuccess Status = "success"
	// StatusPartial: a task some of whose batches failed.
	StatusPartial Status = "partial"
	// StatusSkipped: a task the producer ended before any model call
	// (nothing to predict, too little history): a verdict.
	StatusSkipped Status = "skipped"
	// StatusDryRun: a dry-run task whose every batch was predicted.
	StatusDryRun Status = "dry_run"
	// StatusFailed: a task, a batch or a verdict that failed.
	StatusFailed Status = "failed"
	// StatusOK: a batch predicted, its result carrying the predictions.
	StatusOK Status = "ok"
	// StatusVerdict: the ledger's mark of a result that ended its task in
	// the producer, without batches.
	StatusVerdict Status = "verdict"
)

// Done reports whether a task's status is final.
func (s Status) Done() bool { return s != StatusRunning && s != "" }

// result reports whether s is a status a result message may carry: a
// batch's outcome or a verdict's.
func (s Status) result() bool {
	return s == StatusOK || s == StatusFailed || s == StatusSkipped || s == StatusSeries
}
