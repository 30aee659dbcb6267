package writer

// Many series in one run (group_by): every series is a task of its own
// whose meta names its parent, the run's task. The producer announces the
// parent (its series count) before any series; the parent is settled here
// once each of its series has ended, by whichever result ends the last one
// (or by the announcement, when every series ended before it arrived), and
// only then is its summary published, where the engine endpoint waits for
// it. Series' own summaries are not published: nobody waits for them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// seriesTags is a series task's tags for its ledger row; nil for any other
// task.
func seriesTags(m schemas.TaskMeta) []byte {
	if m.Parent == "" {
		return nil
	}
	tags := m.Series
	if tags == nil {
		tags = map[string]string{}
	}
	b, _ := json.Marshal(tags)
	return b
}

// handleAnnounce records a parent task (its series count and what
// max_run_predict_rows cut), then settles it if its series all ended.
func (w *Writer) handleAnnounce(ctx context.Context, msg jetstream.Msg, r result) error {
	var b pgx.Batch
	queueTask(&b, r.Meta)
	if r.Message != "" {
		b.Queue(`UPDATE regressd_tasks SET message = $2 WHERE task_id = $1 AND status = 'running' AND message = ''`, r.Meta.TaskID, r.Message)
	}
	if err := w.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("ledger parent task: %w", err)
	}
	if err := w.settleParent(ctx, r.Meta.TaskID); err != nil {
		return err
	}
	return msg.Ack()
}

// handleSeriesResult ends the handling of a series task's result (written
// with outcome status): when the series has ended, its parent may settle.
func (w *Writer) handleSeriesResult(ctx context.Context, msg jetstream.Msg, r result, status schemas.Status) error {
	if status == schemas.StatusRunning || status == statusCovered {
		return msg.Ack()
	}
	s, err := summary(ctx, w.pool, r.Meta.TaskID)
	if err != nil {
		return err
	}
	if s.Done() {
		if err := w.settleParent(ctx, r.Meta.Parent); err != nil {
			return err
		}
	}
	if err := msg.Ack(); err != nil {
		return err
	}
	w.forgetContext(ctx, s, r.Meta.ContextNUID)
	return nil
}

// settleParent settles a parent task once every one of its series has
// ended, and publishes its summary; a parent not announced yet, or with
// series still running, is left alone. Settling again only publishes.
func (w *Writer) settleParent(ctx context.Context, parent string) error {
	var total int
	var dry bool
	var status schemas.Status
	var note string
	err := w.pool.QueryRow(ctx, `SELECT series_total, dry_run, status, message FROM regressd_tasks WHERE task_id = $1`, parent).
		Scan(&total, &dry, &status, &note)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && total == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read parent task %s: %w", parent, err)
	}
	if status == schemas.StatusRunning {
		settled, err := w.settleParentRow(ctx, parent, total, dry, note)
		if err != nil || !settled {
			return err
		}
	}
	_, err = w.publishSummary(ctx, parent, "")
	return err
}

// settleParentRow sums a parent's series into its ledger row once they
// have all ended; false while some still run.
func (w *Writer) settleParentRow(ctx context.Context, parent string, total int, dry bool, note string) (bool, error) {
	rows, err := w.pool.Query(ctx, `SELECT status, count(*), sum(written)::bigint, sum(skipped_existing), sum(context_rows),
		sum(query_rows), sum(read_rows), sum(batches), sum(batches_done), sum(batches_failed), sum(remaining)::bigint
		FROM regressd_tasks WHERE parent_id = $1 GROUP BY status`, parent)
	if err != nil {
		return false, fmt.Errorf("read series of %s: %w", parent, err)
	}
	var c schemas.SeriesCounts
	var sum [9]int64 // written … remaining, over every series
	var st schemas.Status
	var n int
	var v [9]int64
	dst := []any{&st, &n}
	for i := range v {
		dst = append(dst, &v[i])
	}
	if _, err := pgx.ForEachRow(rows, dst, func() error {
		tsdb.SeriesOutcome(&c, st, n)
		for i := range v {
			sum[i] += v[i]
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("read series of %s: %w", parent, err)
	}
	if c.Succeeded+c.Skipped+c.Failed < total {
		return false, nil
	}
	status, code := schemas.StatusSuccess, 0
	msg := fmt.Sprintf("%d series: %d succeeded, %d skipped, %d failed", total, c.Succeeded, c.Skipped, c.Failed)
	switch {
	case c.Failed > 0 && c.Succeeded == 0:
		status, code = schemas.StatusFailed, http.StatusBadGateway
	case c.Failed > 0:
		status = schemas.StatusPartial
	case c.Skipped == total:
		// Nothing was predicted, as a single series' run that skips.
		status = schemas.StatusSkipped
	case dry:
		status = schemas.StatusDryRun
	}
	if c.Failed > 0 {
		var tags []byte
		var first string
		var firstCode int
		w.pool.QueryRow(ctx, `SELECT t.series, CASE WHEN t.message <> '' THEN t.message ELSE coalesce((SELECT b.message
			FROM regressd_task_batches b WHERE b.task_id = t.task_id AND b.status = 'failed' ORDER BY b.batch_no LIMIT 1), '') END, t.code
			FROM regressd_tasks t WHERE t.parent_id = $1 AND t.status IN ('failed', 'partial') ORDER BY t.series::text LIMIT 1`, parent).
			Scan(&tags, &first, &firstCode)
		var m map[string]string
		json.Unmarshal(tags, &m)
		msg += fmt.Sprintf("; first failure (%s): %s", schemas.FormatTags(m), first)
		if status == schemas.StatusFailed && firstCode >= http.StatusBadRequest {
			code = firstCode
		}
	}
	if note != "" {
		msg += "; " + note
	}
	_, err = w.pool.Exec(ctx, `UPDATE regressd_tasks SET status = $2, message = $3, code = $4, written = $5, skipped_existing = $6,
		context_rows = $7, query_rows = $8, batches = $9, batches_done = $10, batches_failed = $11, remaining = $12, updated = now()
		WHERE task_id = $1 AND status = 'running'`,
		parent, status, msg, code, sum[0], sum[1], sum[2], sum[3], sum[5], sum[6], sum[7], sum[8])
	if err != nil {
		return false, fmt.Errorf("settle parent task %s: %w", parent, err)
	}
	return true, nil
}

// addSeries adds a parent task's series to its summary: their counts, and
// the first MaxInlineSeries of them (every one, with its predictions, in a
// dry run).
func addSeries(ctx context.Context, db tsdb.Querier, s *schemas.TaskSummary, dry bool) error {
	limit := schemas.MaxInlineSeries
	if dry {
		limit = maxDrySeries
	}
	c, list, err := tsdb.RunSeries(ctx, db, s.TaskID, limit, dry && s.Done())
	if err != nil || c.Total == 0 {
		return err
	}
	s.Series, s.SeriesResults = &c, list
	return nil
}

// maxDrySeries bounds the series a dry run's summary lists with their
// predictions.
const maxDrySeries = 10_000

// trimSeries keeps the first MaxInlineSeries series, without predictions:
// a summary too large for the task bucket.
func trimSeries(list []schemas.SeriesResult) []schemas.SeriesResult {
	list = list[:min(len(list), schemas.MaxInlineSeries)]
	for i := range list {
		list[i].Predictions = nil
	}
	return list
}
