package writer

import (
	"time"

	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// tally is what one transaction wrote and settled, recorded in the metrics
// only once it committed.
type tally struct {
	written, skipped int
	tasks            []taskEnd
}

// taskEnd is a task that reached its final status in the transaction.
type taskEnd struct {
	status    schemas.Status
	requested time.Time
}

func (n *tally) wrote(wr tsdb.Write, written int64) {
	n.written += int(written)
	if wr.KeepExisting {
		n.skipped += len(wr.Points) - int(written)
	}
}

// settled counts a task that ended; a group_by run's series are not
// tasks of their own to the metrics (their run is counted when it settles).
func (n *tally) settled(s schemas.Status, meta schemas.TaskMeta) {
	if meta.Parent != "" {
		return
	}
	n.tasks = append(n.tasks, taskEnd{s, meta.Requested})
}

// record adds the tally to m: rows written and kept, tasks settled with
// their end-to-end latency (from the job's publication; unknown for a job
// of an older scheduler).
func (n tally) record(m *metrics.Metrics) {
	m.AddRows(metrics.RowsWritten, n.written)
	m.AddRows(metrics.RowsSkippedExisting, n.skipped)
	for _, t := range n.tasks {
		took := time.Duration(-1)
		if !t.requested.IsZero() {
			took = time.Since(t.requested)
		}
		m.ObserveTask(string(t.status), took)
	}
}
