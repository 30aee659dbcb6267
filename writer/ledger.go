package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/schemas"
)

// taskColumns are the columns a task's ledger row is created with, and
// taskConflict what creating it again does: only a task settled without
// batches (its job dead-lettered) that now has batches, or a group_by run
// that now has its series (the job retried from the DLQ), is reopened.
const (
	taskColumns = `task_id, trigger_name, measurement, target, model, window_start, window_end,
			origin, dry_run, status, batches, context_rows, query_rows, read_rows, read_truncated, skipped_existing,
			parent_id, series, series_total`
	taskConflict = `ON CONFLICT (task_id) DO UPDATE SET batches = EXCLUDED.batches, status = 'running', message = '', code = 0,
			context_rows = EXCLUDED.context_rows, query_rows = EXCLUDED.query_rows, read_rows = EXCLUDED.read_rows,
			read_truncated = EXCLUDED.read_truncated, skipped_existing = EXCLUDED.skipped_existing,
			series_total = EXCLUDED.series_total, updated = now()
		WHERE regressd_tasks.batches = 0 AND (EXCLUDED.batches > 0
			OR EXCLUDED.series_total > 0 AND regressd_tasks.series_total = 0)`
)

// queueTask queues the creation of a task's ledger row on its first result.
func queueTask(b *pgx.Batch, m schemas.TaskMeta) {
	b.Queue(`INSERT INTO regressd_tasks (`+taskColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'running', $10, $11, $12, $13, $14, $15, $16, $17, $18) `+taskConflict,
		m.TaskID, m.Trigger, m.Measurement, m.Target, m.Model, m.Start, m.End, m.Origin, m.DryRun,
		m.Batches, m.ContextRows, m.QueryRows, m.ReadRows, m.ReadTruncated, m.SkippedExists,
		m.Parent, seriesTags(m), m.SeriesTotal)
}

// queueTasks is queueTask for many tasks (distinct, in the order their
// rows are locked) in one statement.
func queueTasks(b *pgx.Batch, ms []schemas.TaskMeta) {
	if len(ms) == 1 {
		queueTask(b, ms[0])
		return
	}
	n := len(ms)
	ids, triggers, measurements, targets, models, origins, parents := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	starts, ends := make([]time.Time, n), make([]time.Time, n)
	dry, truncated := make([]bool, n), make([]bool, n)
	batches, contextRows, queryRows, readRows, skipped, total := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	series := make([]*string, n)
	for i, m := range ms {
		ids[i], triggers[i], measurements[i], targets[i], models[i], origins[i], parents[i] = m.TaskID, m.Trigger, m.Measurement, m.Target, m.Model, m.Origin, m.Parent
		starts[i], ends[i], dry[i], truncated[i] = m.Start, m.End, m.DryRun, m.ReadTruncated
		batches[i], contextRows[i], queryRows[i], readRows[i], skipped[i], total[i] = int32(m.Batches), int32(m.ContextRows), int32(m.QueryRows), int32(m.ReadRows), int32(m.SkippedExists), int32(m.SeriesTotal)
		if tags := seriesTags(m); tags != nil {
			t := string(tags)
			series[i] = &t
		}
	}
	b.Queue(`INSERT INTO regressd_tasks (`+taskColumns+`)
		SELECT id, tr, me, ta, mo, st, en, ori, dr, 'running', ba, cr, qr, rr, tru, sk, pa, se::jsonb, tot
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[], $9::bool[],
			$10::int[], $11::int[], $12::int[], $13::int[], $14::bool[], $15::int[], $16::text[], $17::text[], $18::int[])
			AS v(id, tr, me, ta, mo, st, en, ori, dr, ba, cr, qr, rr, tru, sk, pa, se, tot) `+taskConflict,
		ids, triggers, measurements, targets, models, starts, ends, origins, dry, batches, contextRows, queryRows, readRows, truncated, skipped, parents, series, total)
}

// claimBatches records the results' batches in one statement and reports
// which are new; false means a batch was recorded before (a redelivery) and
// must not be written again. One exception: a batch recorded as failed (it
// was dead-lettered) whose result now succeeds (retried from the DLQ) has
// its failure undone here and is written as new. The statements queued in
// pre (nil: none) run first, in the same round trip.
func claimBatches(ctx context.Context, tx pgx.Tx, pre *pgx.Batch, rs []result) ([]bool, error) {
	n := len(rs)
	tasks, batches, statuses, rows, msgs, codes := make([]string, n), make([]int32, n), make([]string, n), make([]int32, n), make([]string, n), make([]int32, n)
	// written is what a result's points are expected to write; its
	// transaction sets what they did (finishTasks, finishSeries).
	outside, written := make([]int32, n), make([]int32, n)
	for i, r := range rs {
		tasks[i], batches[i], statuses[i], rows[i], msgs[i], codes[i] = r.Meta.TaskID, int32(r.Batch), string(r.Status), int32(r.Rows), r.Message, int32(r.Code)
		outside[i], written[i] = int32(r.Outside), int32(len(r.points))
		if r.Batch < 0 {
			statuses[i] = string(schemas.StatusVerdict)
		}
	}
	if pre == nil {
		pre = &pgx.Batch{}
	}
	first := pre.Len()
	pre.Queue(`INSERT INTO regressd_task_batches (task_id, batch_no, status, rows, message, code, outside, written)
		SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::int[], $7::int[], $8::int[])
		ON CONFLICT DO NOTHING RETURNING task_id, batch_no`, tasks, batches, statuses, rows, msgs, codes, outside, written)
	br := tx.SendBatch(ctx, pre)
	defer br.Close()
	for range first {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("ledger task: %w", err)
		}
	}
	claimed, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("ledger batch: %w", err)
	}
	type key struct {
		task  string
		batch int32
	}
	fresh := map[key]bool{}
	var k key
	_, err = pgx.ForEachRow(claimed, []any{&k.task, &k.batch}, func() error {
		fresh[k] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger batch: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("ledger batch: %w", err)
	}
	out := make([]bool, n)
	for i, r := range rs {
		out[i] = fresh[key{r.Meta.TaskID, int32(r.Batch)}]
		if !out[i] && r.Status == schemas.StatusOK && r.Batch >= 0 {
			if out[i], err = repairBatch(ctx, tx, r); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// repairBatch undoes the recorded failure of a batch whose result now
// succeeds; false means the batch was recorded as anything but failed.
func repairBatch(ctx context.Context, tx pgx.Tx, r result) (bool, error) {
	var prev string
	var prevRows int
	err := tx.QueryRow(ctx, `SELECT status, rows FROM regressd_task_batches WHERE task_id = $1 AND batch_no = $2 FOR UPDATE`,
		r.Meta.TaskID, r.Batch).Scan(&prev, &prevRows)
	if err != nil || prev != string(schemas.StatusFailed) {
		return false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE regressd_task_batches SET status = $3, rows = $4, message = '', written = 0, committed = now(), outside = $5
		WHERE task_id = $1 AND batch_no = $2`, r.Meta.TaskID, r.Batch, r.Status, r.Rows, r.Outside); err != nil {
		return false, fmt.Errorf("ledger batch repair: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE regressd_tasks SET batches_failed = batches_failed - 1, remaining = greatest(remaining - $2, 0)
		WHERE task_id = $1`, r.Meta.TaskID, prevRows); err != nil {
		return false, fmt.Errorf("ledger batch repair: %w", err)
	}
	return true, nil
}

// settled is a claimed batch's outcome: the rows written, and for a dry
// run the predictions it returns instead.
type settled struct {
	written int64
	preview []schemas.Prediction
}

// finishTasks adds the outcomes of claimed batches (rs[i] with out[i] not
// nil; rs sorted by task) to their tasks, one statement per task, all sent
// at once; each task's status is settled once every batch is in. It
// returns each task's status after its batches. With commit, the
// transaction's COMMIT goes in the same round trip (pipelinedTx).
func finishTasks(ctx context.Context, tx pgx.Tx, rs []result, out []*settled, commit bool) (map[string]schemas.Status, error) {
	var b pgx.Batch
	// reads[k] is the task whose status the k-th statement returns, or ""
	// for a preview's update.
	var reads []string
	for lo := 0; lo < len(rs); {
		hi := lo
		for hi < len(rs) && rs[hi].Meta.TaskID == rs[lo].Meta.TaskID {
			hi++
		}
		var nos []int32
		var written []int64
		var done, failed int
		var total, remaining, outside int64
		for i := lo; i < hi; i++ {
			if out[i] == nil {
				continue
			}
			r := rs[i]
			if out[i].preview != nil {
				p, _ := json.Marshal(out[i].preview)
				b.Queue(`UPDATE regressd_task_batches SET preview = $3 WHERE task_id = $1 AND batch_no = $2`, r.Meta.TaskID, r.Batch, p)
				reads = append(reads, "")
			}
			nos, written = append(nos, int32(r.Batch)), append(written, out[i].written)
			total += out[i].written
			if r.Status == schemas.StatusOK {
				done++
				outside += int64(r.Outside)
			} else {
				failed++
				remaining += int64(r.Rows)
			}
		}
		if len(nos) > 0 {
			// The batches' written counts ride along in the same statement.
			b.Queue(`
				WITH b AS (UPDATE regressd_task_batches AS tb SET written = v.written
					FROM unnest($6::int[], $7::bigint[]) AS v(batch_no, written)
					WHERE tb.task_id = $1 AND tb.batch_no = v.batch_no)
				UPDATE regressd_tasks SET
					batches_done = batches_done + $2, batches_failed = batches_failed + $3,
					written = written + $4, remaining = remaining + $5, outside_range = outside_range + $8, updated = now(),
					status = CASE
						WHEN batches_done + $2 + batches_failed + $3 < batches THEN 'running'
						WHEN batches_failed + $3 = batches THEN 'failed'
						WHEN batches_failed + $3 > 0 THEN 'partial'
						WHEN dry_run THEN 'dry_run'
						ELSE 'success' END
				WHERE task_id = $1
				RETURNING status`, rs[lo].Meta.TaskID, done, failed, total, remaining, nos, written, outside)
			reads = append(reads, rs[lo].Meta.TaskID)
		}
		lo = hi
	}
	statuses := map[string]schemas.Status{}
	if len(reads) == 0 {
		return statuses, nil
	}
	if commit {
		queueCommit(&b)
	}
	// One round trip for every task of the group; the statements run in
	// the group's order, so two groups lock their tasks' rows alike.
	br := tx.SendBatch(ctx, &b)
	defer br.Close()
	for _, task := range reads {
		if task == "" {
			if _, err := br.Exec(); err != nil {
				return nil, fmt.Errorf("ledger preview: %w", err)
			}
			continue
		}
		var st schemas.Status
		if err := br.QueryRow().Scan(&st); err != nil {
			return nil, fmt.Errorf("ledger task update: %w", err)
		}
		statuses[task] = st
	}
	if commit {
		if err := commitResult(br); err != nil {
			return nil, err
		}
	}
	return statuses, br.Close()
}

// settleVerdict records a task that ended in the producer; settled is
// false when it did not settle the task.
// A verdict never overrides a task that has batches: a job planned twice at
// once (its first delivery still running when the second came) may end once
// in batches and once in a verdict ("nothing left to predict"); the batches
// are the truth, and a task settled by a verdict reopens when batches come.
// Nor does it settle a group_by run once announced (series_total > 0): the
// run settles when every one of its series has (settleParent), and the
// verdict, kept in its message, is said then.
func settleVerdict(ctx context.Context, tx pgx.Tx, taskID string, status schemas.Status, msg string, code int) (settled bool, err error) {
	err = tx.QueryRow(ctx, `UPDATE regressd_tasks SET
			status = CASE WHEN series_total = 0 THEN $2 ELSE status END,
			message = CASE WHEN series_total = 0 OR message = '' THEN $3 ELSE message || '; ' || $3 END,
			code = CASE WHEN series_total = 0 THEN $4 ELSE code END, updated = now()
		WHERE task_id = $1 AND batches = 0 AND (series_total = 0 OR status = 'running')
		RETURNING series_total = 0`, taskID, status, msg, code).Scan(&settled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return settled, err
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
	var seriesTotal int
	err := db.QueryRow(ctx, `SELECT task_id, trigger_name, status, message, written, batches, batches_done, batches_failed,
		remaining, context_rows, query_rows, read_rows, read_truncated, skipped_existing, window_start, window_end, model, dry_run, updated, code,
		outside_range, series_total
		FROM regressd_tasks WHERE task_id = $1`, taskID).Scan(&s.TaskID, &s.Trigger, &s.Status, &s.Message, &s.Written,
		&s.Batches, &s.BatchesDone, &s.BatchesFailed, &s.Remaining, &s.ContextRows, &s.QueryRows, &s.ReadRows,
		&s.ReadTruncated, &s.SkippedExisting, &s.Start, &s.End, &s.Model, &dry, &s.Updated, &s.Code, &s.OutsideRange, &seriesTotal)
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
			// Every batch failed. When each failed for one reason that is
			// the caller's to fix (a gateway's refusal), say so; otherwise
			// the model side failed.
			var codes []int32
			db.QueryRow(ctx, `SELECT array_agg(DISTINCT code) FROM regressd_task_batches WHERE task_id = $1 AND status = 'failed'`, taskID).Scan(&codes)
			s.Code = http.StatusBadGateway
			if len(codes) == 1 && codes[0] >= http.StatusBadRequest && codes[0] < http.StatusInternalServerError {
				s.Code = int(codes[0])
			}
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
	// Only a group_by run (series announced) lists series: the others need
	// no second look at the ledger.
	if seriesTotal > 0 {
		if err := addSeries(ctx, db, &s, dry); err != nil {
			return s, err
		}
	}
	if s.Updated.IsZero() {
		s.Updated = time.Now().UTC()
	}
	return s, nil
}
