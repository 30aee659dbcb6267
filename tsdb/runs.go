package tsdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/schemas"
)

// Reads of the task ledger (regressd_tasks, regressd_task_batches) for the
// status page and the admin API. The writer owns these tables and writes
// them; nothing here writes.

// ErrNoRun means the ledger has no task of that id.
var ErrNoRun = errors.New("no such run")

// runColumns are the ledger columns a schemas.Run is read from, in
// scanRun's order; t is regressd_tasks.
const runColumns = `t.task_id, t.trigger_name, t.status, t.message, t.code, t.origin, t.dry_run,
	t.measurement, t.target, t.model, t.window_start, t.window_end,
	t.batches, t.batches_done, t.batches_failed, t.written, t.remaining,
	t.context_rows, t.query_rows, t.read_rows, t.read_truncated, t.skipped_existing, t.created, t.updated,
	t.outside_range,
	CASE WHEN t.batches_failed > 0 THEN coalesce((SELECT b.message FROM regressd_task_batches b
		WHERE b.task_id = t.task_id AND b.status = 'failed' ORDER BY b.batch_no LIMIT 1), '') ELSE '' END`

func scanRun(row pgx.Row) (schemas.Run, error) {
	var r schemas.Run
	err := row.Scan(&r.TaskID, &r.Trigger, &r.Status, &r.Message, &r.Code, &r.Origin, &r.DryRun,
		&r.Measurement, &r.Target, &r.Model, &r.Start, &r.End,
		&r.Batches, &r.BatchesDone, &r.BatchesFailed, &r.Written, &r.Remaining,
		&r.ContextRows, &r.QueryRows, &r.ReadRows, &r.ReadTruncated, &r.SkippedExisting, &r.Created, &r.Updated,
		&r.OutsideRange, &r.FirstFailure)
	r.Start, r.End, r.Created, r.Updated = r.Start.UTC(), r.End.UTC(), r.Created.UTC(), r.Updated.UTC()
	return r, err
}

// Runs returns the newest runs, newest first: of one trigger when trigger
// is not empty. limit must be positive.
func (db *DB) Runs(ctx context.Context, trigger string, limit int) ([]schemas.Run, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+runColumns+` FROM regressd_tasks t
		WHERE ($1 = '' OR t.trigger_name = $1) AND t.parent_id = '' ORDER BY t.created DESC, t.task_id LIMIT $2`, trigger, limit)
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (schemas.Run, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	return out, nil
}

// LastRuns returns the newest run of every trigger the ledger knows, by
// trigger name.
func (db *DB) LastRuns(ctx context.Context) (map[string]schemas.Run, error) {
	rows, err := db.pool.Query(ctx, `SELECT DISTINCT ON (t.trigger_name) `+runColumns+` FROM regressd_tasks t
		WHERE t.parent_id = '' ORDER BY t.trigger_name, t.created DESC, t.task_id`)
	if err != nil {
		return nil, fmt.Errorf("read last runs: %w", err)
	}
	out := map[string]schemas.Run{}
	if _, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		r, err := scanRun(row)
		out[r.Trigger] = r
		return struct{}{}, err
	}); err != nil {
		return nil, fmt.Errorf("read last runs: %w", err)
	}
	return out, nil
}

// Run returns one run and its batches in order; ErrNoRun when the ledger
// has no such task.
func (db *DB) Run(ctx context.Context, taskID string) (schemas.Run, []schemas.RunBatch, error) {
	r, err := scanRun(db.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM regressd_tasks t WHERE t.task_id = $1`, taskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, nil, fmt.Errorf("run %s: %w", taskID, ErrNoRun)
	}
	if err != nil {
		return r, nil, fmt.Errorf("read run %s: %w", taskID, err)
	}
	rows, err := db.pool.Query(ctx, `SELECT batch_no, status, rows, written, message, code, committed
		FROM regressd_task_batches WHERE task_id = $1 ORDER BY batch_no`, taskID)
	if err != nil {
		return r, nil, fmt.Errorf("read batches of %s: %w", taskID, err)
	}
	batches, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schemas.RunBatch, error) {
		var b schemas.RunBatch
		err := row.Scan(&b.Batch, &b.Status, &b.Rows, &b.Written, &b.Message, &b.Code, &b.Committed)
		b.Committed = b.Committed.UTC()
		return b, err
	})
	if err != nil {
		return r, nil, fmt.Errorf("read batches of %s: %w", taskID, err)
	}
	return r, batches, nil
}
