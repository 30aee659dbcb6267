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
	"hash/fnv"
	"net/http"
	"strings"
	"time"

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
// max_run_predict_rows cut) with the series that ended before it, then
// settles it if they all did.
func (w *Writer) handleAnnounce(ctx context.Context, msg jetstream.Msg, r result) error {
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if err := lockParent(ctx, tx, r.Meta.TaskID); err != nil {
			return err
		}
		var b pgx.Batch
		queueTask(&b, r.Meta)
		b.Queue(`WITH c AS (SELECT `+seriesProgress+` FROM regressd_tasks WHERE parent_id = $1 AND series_counted)
			UPDATE regressd_tasks p SET message = CASE WHEN message = '' THEN $2 ELSE message END,
			series_ended = (SELECT count(*) FROM c), `+setProgress("", "c")+`
			WHERE task_id = $1 AND status = 'running'`, r.Meta.TaskID, r.Message)
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("ledger parent task: %w", err)
	}
	if err := w.settleParent(ctx, r.Meta.TaskID); err != nil {
		return err
	}
	return msg.Ack()
}

// lockParent serialises, within a transaction, the counting of a parent's
// ended series with the recording of its announcement.
func lockParent(ctx context.Context, tx pgx.Tx, parent string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, parentLockKey(parent))
	return err
}

// parentLockKey is the advisory lock of a parent's series count.
func parentLockKey(parent string) int64 {
	h := fnv.New64a()
	h.Write([]byte("parent\x00" + parent))
	return int64(h.Sum64())
}

// handleSeriesResult ends the handling of a series task's result (written
// with outcome status): when the series has ended, it is counted into its
// parent (once), which settles when the count reaches its series total.
func (w *Writer) handleSeriesResult(ctx context.Context, msg jetstream.Msg, r result, status schemas.Status) error {
	if status == schemas.StatusRunning || status == statusCovered {
		return msg.Ack()
	}
	if status == "" {
		// A verdict, or a result written before: read the series' state.
		if err := w.pool.QueryRow(ctx, `SELECT status FROM regressd_tasks WHERE task_id = $1`, r.Meta.TaskID).Scan(&status); err != nil {
			return fmt.Errorf("read series task %s: %w", r.Meta.TaskID, err)
		}
	}
	if !status.Done() {
		return msg.Ack()
	}
	if err := w.countSeries(ctx, r.Meta.TaskID, r.Meta.Parent); err != nil {
		return err
	}
	if err := msg.Ack(); err != nil {
		return err
	}
	if status == schemas.StatusSuccess || status == schemas.StatusDryRun {
		// Every batch written: its context is not needed any more.
		w.forgetContext(ctx, schemas.TaskSummary{TaskID: r.Meta.TaskID, Status: status, Batches: r.Meta.Batches, BatchesDone: r.Meta.Batches}, r.Meta.ContextNUID)
	}
	return nil
}

// countSeries counts an ended series into its parent, once, and settles
// the parent when it was the last. One round trip: a batch runs as one
// implicit transaction, under the parent's lock (see handleAnnounce).
func (w *Writer) countSeries(ctx context.Context, taskID, parent string) error {
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, parentLockKey(parent))
	b.Queue(`WITH c AS (UPDATE regressd_tasks SET series_counted = true WHERE task_id = $1 AND NOT series_counted
			RETURNING `+seriesProgress+`)
		UPDATE regressd_tasks p SET series_ended = p.series_ended + (SELECT count(*) FROM c), `+setProgress("p", "c")+`
		WHERE task_id = $2 RETURNING series_ended, series_total`, taskID, parent)
	br := w.pool.SendBatch(ctx, &b)
	var ended, total int
	_, err := br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&ended, &total)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // not announced yet: the announcement counts this series
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("count series %s into %s: %w", taskID, parent, err)
	}
	if total == 0 || ended < total {
		w.publishProgress(ctx, parent)
		return nil
	}
	return w.settleParent(ctx, parent)
}

// publishProgress publishes a running group_by run's summary (the sums of
// its ended series, seriesProgress), at most once a second; a failure to
// is logged: the next series, or the run's end, publishes again.
func (w *Writer) publishProgress(ctx context.Context, parent string) {
	if _, err := w.publishSummary(ctx, parent, schemas.StatusRunning); err != nil {
		w.log.Debug("publish run progress", "task_id", parent, "err", err)
	}
}

// seriesProgress are the ledger's progress columns a running parent sums
// over its ended series, so a run reports what it has written while other
// series still run; the settled parent's row is the sum over all of them
// (settleParentRow). Not its batches: a parent's batches stay 0 until it
// settles, which is how the ledger tells a run's row from a series' (a
// verdict or a job planned again must not take it for one with batches).
const seriesProgress = `written, skipped_existing, context_rows, query_rows, read_rows, outside_range`

// setProgress is the SET list putting the seriesProgress sums of the rows
// of from into a row: added to the row's own values (table alias to), or
// in their place when to is "".
func setProgress(to, from string) string {
	var set []string
	for _, col := range strings.Split(seriesProgress, ", ") {
		sum := fmt.Sprintf("(SELECT coalesce(sum(%s), 0) FROM %s)", col, from)
		if to != "" {
			sum = to + "." + col + " + " + sum
		}
		set = append(set, col+" = "+sum)
	}
	return strings.Join(set, ", ")
}

// settleParent settles a parent task once every one of its series has
// ended, and publishes its summary; a parent not announced yet, or with
// series still running, is left alone. Settling again only publishes.
func (w *Writer) settleParent(ctx context.Context, parent string) error {
	var total, ended int
	var dry bool
	var status schemas.Status
	var note string
	err := w.pool.QueryRow(ctx, `SELECT series_total, series_ended, dry_run, status, message FROM regressd_tasks WHERE task_id = $1`, parent).
		Scan(&total, &ended, &dry, &status, &note)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && (total == 0 || ended < total) {
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
		sum(query_rows), sum(read_rows), sum(batches), sum(batches_done), sum(batches_failed), sum(remaining)::bigint,
		sum(outside_range)::bigint
		FROM regressd_tasks WHERE parent_id = $1 GROUP BY status`, parent)
	if err != nil {
		return false, fmt.Errorf("read series of %s: %w", parent, err)
	}
	var c schemas.SeriesCounts
	var sum [10]int64 // written … remaining, outside_range, over every series
	var st schemas.Status
	var n int
	var v [10]int64
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
	var created time.Time
	err = w.pool.QueryRow(ctx, `UPDATE regressd_tasks SET status = $2, message = $3, code = $4, written = $5, skipped_existing = $6,
		context_rows = $7, query_rows = $8, batches = $9, batches_done = $10, batches_failed = $11, remaining = $12,
		outside_range = $13, updated = now()
		WHERE task_id = $1 AND status = 'running' RETURNING created`,
		parent, status, msg, code, sum[0], sum[1], sum[2], sum[3], sum[5], sum[6], sum[7], sum[8], sum[9]).Scan(&created)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return true, nil // settled by another writer
	case err != nil:
		return false, fmt.Errorf("settle parent task %s: %w", parent, err)
	}
	// The run is the task the metrics count (its series are not), from its
	// ledger row's creation.
	w.cfg.Metrics.ObserveTask(string(status), time.Since(created))
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
