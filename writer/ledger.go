package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/schemas"
)

// ensureTask creates the task's ledger row on its first result.
func ensureTask(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, m schemas.TaskMeta) error {
	_, err := db.Exec(ctx, `
		INSERT INTO regressd_tasks (task_id, trigger_name, measurement, target, model, window_start, window_end,
			origin, dry_run, status, batches, context_rows, query_rows, read_rows, read_truncated, skipped_existing)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'running', $10, $11, $12, $13, $14, $15)
		ON CONFLICT (task_id) DO UPDATE SET batches = EXCLUDED.batches, status = 'running', message = '', code = 0,
			context_rows = EXCLUDED.context_rows, query_rows = EXCLUDED.query_rows, read_rows = EXCLUDED.read_rows,
			read_truncated = EXCLUDED.read_truncated, skipped_existing = EXCLUDED.skipped_existing, updated = now()
		-- Only a task settled without batches (its job dead-lettered) that
		-- now has batches (the job retried from the DLQ) is reopened.
		WHERE regressd_tasks.batches = 0 AND EXCLUDED.batches > 0`,
		m.TaskID, m.Trigger, m.Measurement, m.Target, m.Model, m.Start, m.End, m.Origin, m.DryRun,
		m.Batches, m.ContextRows, m.QueryRows, m.ReadRows, m.ReadTruncated, m.SkippedExists)
	if err != nil {
		return fmt.Errorf("ledger task: %w", err)
	}
	return nil
}

// claimBatch records a batch; false means it was recorded before (a
// redelivery) and must not be written again. One exception: a batch recorded
// as failed (it was dead-lettered) whose result now succeeds (retried from
// the DLQ) has its failure undone here and is written as new.
func claimBatch(ctx context.Context, tx pgx.Tx, taskID string, batch int, status string, rows int, msg string) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO regressd_task_batches (task_id, batch_no, status, rows, message)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, taskID, batch, status, rows, msg)
	if err != nil {
		return false, fmt.Errorf("ledger batch: %w", err)
	}
	if tag.RowsAffected() == 1 || status != schemas.BatchOK || batch < 0 {
		return tag.RowsAffected() == 1, nil
	}
	var prev string
	var prevRows int
	err = tx.QueryRow(ctx, `SELECT status, rows FROM regressd_task_batches WHERE task_id = $1 AND batch_no = $2 FOR UPDATE`,
		taskID, batch).Scan(&prev, &prevRows)
	if err != nil || prev != schemas.BatchFailed {
		return false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE regressd_task_batches SET status = $3, rows = $4, message = '', written = 0, committed = now()
		WHERE task_id = $1 AND batch_no = $2`, taskID, batch, status, rows); err != nil {
		return false, fmt.Errorf("ledger batch repair: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE regressd_tasks SET batches_failed = batches_failed - 1, remaining = greatest(remaining - $2, 0)
		WHERE task_id = $1`, taskID, prevRows); err != nil {
		return false, fmt.Errorf("ledger batch repair: %w", err)
	}
	return true, nil
}

// finishBatch adds a batch's outcome to its task, settles the task's
// status once every batch is in, and returns that status.
func finishBatch(ctx context.Context, tx pgx.Tx, taskID string, batch int, ok bool, rows int, written int64, preview []schemas.Prediction) (string, error) {
	if preview != nil {
		b, _ := json.Marshal(preview)
		if _, err := tx.Exec(ctx, `UPDATE regressd_task_batches SET preview = $3 WHERE task_id = $1 AND batch_no = $2`, taskID, batch, b); err != nil {
			return "", err
		}
	}
	done, failed, remaining := 1, 0, 0
	if !ok {
		done, failed, remaining = 0, 1, rows
	}
	// The batch's written count rides along in the same statement: one round
	// trip per result fewer.
	var status string
	err := tx.QueryRow(ctx, `
		WITH b AS (UPDATE regressd_task_batches SET written = $4 WHERE task_id = $1 AND batch_no = $6)
		UPDATE regressd_tasks SET
			batches_done = batches_done + $2, batches_failed = batches_failed + $3,
			written = written + $4, remaining = remaining + $5, updated = now(),
			status = CASE
				WHEN batches_done + $2 + batches_failed + $3 < batches THEN 'running'
				WHEN batches_failed + $3 = batches THEN 'failed'
				WHEN batches_failed + $3 > 0 THEN 'partial'
				WHEN dry_run THEN 'dry_run'
				ELSE 'success' END
		WHERE task_id = $1
		RETURNING status`, taskID, done, failed, written, remaining, batch).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("ledger task update: %w", err)
	}
	return status, nil
}

// settleVerdict records a task that ended in the producer.
// A verdict never overrides a task that has batches: a job planned twice at
// once (its first delivery still running when the second came) may end once
// in batches and once in a verdict ("nothing left to predict"); the batches
// are the truth, and a task settled by a verdict reopens when batches come.
func settleVerdict(ctx context.Context, tx pgx.Tx, taskID, status, msg string, code int) error {
	_, err := tx.Exec(ctx, `UPDATE regressd_tasks SET status = $2, message = $3, code = $4, updated = now() WHERE task_id = $1 AND batches = 0`, taskID, status, msg, code)
	return err
}

// summary reads a task back from the ledger.
// Summary reads a task's summary from the ledger; ok is false when the
// ledger has no such task (not started yet, or unknown).
func Summary(ctx context.Context, pool *pgxpool.Pool, taskID string) (sum schemas.TaskSummary, ok bool, err error) {
	sum, err = summary(ctx, pool, taskID)
	if errors.Is(err, pgx.ErrNoRows) {
		return sum, false, nil
	}
	return sum, err == nil, err
}

func summary(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, taskID string) (schemas.TaskSummary, error) {
	var s schemas.TaskSummary
	var dry bool
	err := db.QueryRow(ctx, `SELECT task_id, trigger_name, status, message, written, batches, batches_done, batches_failed,
		remaining, context_rows, query_rows, read_rows, read_truncated, skipped_existing, window_start, window_end, model, dry_run, updated, code
		FROM regressd_tasks WHERE task_id = $1`, taskID).Scan(&s.TaskID, &s.Trigger, &s.Status, &s.Message, &s.Written,
		&s.Batches, &s.BatchesDone, &s.BatchesFailed, &s.Remaining, &s.ContextRows, &s.QueryRows, &s.ReadRows,
		&s.ReadTruncated, &s.SkippedExisting, &s.Start, &s.End, &s.Model, &dry, &s.Updated, &s.Code)
	if err != nil {
		return s, fmt.Errorf("read task %s: %w", taskID, err)
	}
	s.Start, s.End, s.Updated = s.Start.UTC(), s.End.UTC(), s.Updated.UTC()
	if s.Status == schemas.StatusPartial || s.Status == schemas.StatusFailed {
		var first string
		db.QueryRow(ctx, `SELECT message FROM regressd_task_batches WHERE task_id = $1 AND status = 'failed' ORDER BY batch_no LIMIT 1`, taskID).Scan(&first)
		if s.Message == "" && first != "" {
			s.Message = fmt.Sprintf("%d of %d batches failed; first failure: %s", s.BatchesFailed, s.Batches, first)
		}
		if s.Status == schemas.StatusFailed && s.Code == 0 {
			s.Code = 502 // every model call failed: the model side, not the caller
		}
	}
	if dry && s.Done() {
		rows, err := db.Query(ctx, `SELECT preview FROM regressd_task_batches WHERE task_id = $1 AND preview IS NOT NULL ORDER BY batch_no`, taskID)
		if err != nil {
			return s, err
		}
		defer rows.Close()
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return s, err
			}
			var p []schemas.Prediction
			json.Unmarshal(b, &p)
			s.Predictions = append(s.Predictions, p...)
		}
		for i := range s.Predictions {
			s.Predictions[i].Time = s.Predictions[i].Time.UTC()
		}
	}
	if s.Updated.IsZero() {
		s.Updated = time.Now().UTC()
	}
	return s, nil
}
