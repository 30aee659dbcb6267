package metrics

import "time"

// ObserveTask counts a settled task by its final status (success, partial,
// failed, skipped, dry_run) and records how long it took end to end; a
// negative took (not known) is counted without a duration.
func (m *Metrics) ObserveTask(status string, took time.Duration) {
	if m == nil {
		return
	}
	m.tasks.WithLabelValues(bound(status, taskStatuses())).Inc()
	if took >= 0 {
		m.taskDuration.Observe(took.Seconds())
	}
}

// ObserveStage records how long one stage of a task took.
func (m *Metrics) ObserveStage(s Stage, took time.Duration) {
	if m == nil {
		return
	}
	m.stageDuration.WithLabelValues(bound(string(s), stages())).Observe(took.Seconds())
}

// Time starts timing stage s; calling what it returns records it:
//
//	defer m.Time(metrics.StageWriterCommit)()
func (m *Metrics) Time(s Stage) func() {
	start := time.Now()
	return func() { m.ObserveStage(s, time.Since(start)) }
}

// Rows says which rows counter AddRows adds to.
type Rows int

// Row counters.
const (
	RowsRead            Rows = iota // read from a window by the producer
	RowsPredicted                   // given a value by the predictor
	RowsWritten                     // committed to <measurement>_regressed
	RowsSkippedExisting             // left out because a prediction existed (skip_existing)
)

// AddRows adds n rows to the counter of kind k.
func (m *Metrics) AddRows(k Rows, n int) {
	if m == nil || n <= 0 {
		return
	}
	switch k {
	case RowsRead:
		m.rowsRead.Add(float64(n))
	case RowsPredicted:
		m.rowsPredicted.Add(float64(n))
	case RowsWritten:
		m.rowsWritten.Add(float64(n))
	case RowsSkippedExisting:
		m.rowsSkipped.Add(float64(n))
	}
}

// DeadLetter counts a message of stream copied to the DLQ for reason.
func (m *Metrics) DeadLetter(stream string, r Reason) {
	if m == nil {
		return
	}
	m.deadLetters.WithLabelValues(bound(stream, workStreams()), bound(string(r), reasons())).Inc()
}

// CountDeadLetter is DeadLetter for the bus, which names reasons by their
// text (bus.DeadLetterCounter).
func (m *Metrics) CountDeadLetter(stream, reason string) { m.DeadLetter(stream, Reason(reason)) }
