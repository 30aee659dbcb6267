package writer

// Packs: the results of many small series of a group_by run in one
// message (schemas.DecodeResultPack). One transaction writes them all:
// every series' batch claimed (or verdict settled) and points written, as
// a group of lone results would be (applyIn), and the series that ended
// counted into their parent. A pack delivered again claims nothing and
// counts nothing: each series' batch and count are recorded once.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

func (w *Writer) handlePack(ctx context.Context, msg jetstream.Msg) error {
	rs, err := decodePack(msg.Headers(), msg.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	// One order for every transaction (see applyGroup).
	slices.SortFunc(rs, func(a, b result) int { return strings.Compare(a.Meta.TaskID, b.Meta.TaskID) })
	parent := schemas.PackParent(msg.Headers())
	ended, total, err := w.commitPack(ctx, parent, rs)
	if errors.Is(err, tsdb.ErrIncompatible) || errors.Is(err, tsdb.ErrRefused) {
		// Some series' points cannot be written: each series alone, so
		// that the others are and that one fails (apply).
		w.log.Warn("pack not written whole; writing its series one by one", "task_id", parent, "err", err)
		return w.applyEach(ctx, msg, parent, rs)
	}
	if err != nil {
		return w.writeFailed(ctx, msg, firstWithPoints(rs), err)
	}
	switch {
	case total > 0 && ended >= total:
		if err := w.settleParent(ctx, parent); err != nil {
			return err
		}
	case total > 0:
		w.publishProgress(ctx, parent)
	}
	return msg.Ack()
}

// decodePack reads a pack result: each series' result, its predictions
// its rows of the pack's record.
func decodePack(h nats.Header, data []byte) ([]result, error) {
	raw, body, err := schemas.DecodeResultPack(h, data)
	if err != nil {
		return nil, err
	}
	rs := make([]result, len(raw))
	want := 0
	for i, r := range raw {
		rs[i].Result = r
		if r.Status == schemas.StatusOK {
			want += r.Rows
		}
	}
	if want == 0 {
		return rs, nil
	}
	rec, err := schemas.DecodeRecord(body, schemas.ResultSchemaFor(raw[0].Meta.Quantiles))
	if err != nil {
		return nil, fmt.Errorf("pack predictions: %w", err)
	}
	defer rec.Release()
	if int(rec.NumRows()) != want {
		return nil, fmt.Errorf("pack predictions: %d rows for %d", rec.NumRows(), want)
	}
	at := 0
	for i := range rs {
		if rs[i].Status != schemas.StatusOK {
			continue
		}
		part := rec.NewSlice(int64(at), int64(at+rs[i].Rows))
		rs[i].fromRecord(part)
		part.Release()
		at += rs[i].Rows
	}
	return rs, nil
}

// firstWithPoints is the pack's first result with predictions to write,
// whose write attempts writeFailed counts; else its first.
func firstWithPoints(rs []result) result {
	for _, r := range rs {
		if r.Status == schemas.StatusOK && !r.Meta.DryRun {
			return r
		}
	}
	return rs[0]
}

// commitPack writes a pack's results (sorted by task) in one transaction
// with the count of its ended series into parent; it returns the parent's
// ended series and total (0 when not announced yet).
func (w *Writer) commitPack(ctx context.Context, parent string, rs []result) (ended, total int, err error) {
	if err := w.ensureTaskRows(ctx, rs); err != nil {
		return 0, 0, err
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.Meta.TaskID
	}
	var ensured []string
	var n tally
	committed := w.cfg.Metrics.Time(metrics.StageWriterCommit)
	err = pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		n = tally{}
		counted := []string{}
		if _, ensured, err = w.applyIn(ctx, tx, nil, false, rs, &n, &counted); err != nil {
			return err
		}
		ended, total, err = countEnded(ctx, tx, parent, ids, counted)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	committed()
	n.record(w.cfg.Metrics)
	w.markEnsured(ensured...)
	return ended, total, nil
}

// finishSeries is finishTasks for a pack's results (rs sorted by task):
// each of a task of its own, its one batch, all settled in one statement,
// which also marks each series that ended as counted into its run (see
// countEnded) and appends those it newly marked to *counted. No other
// transaction updates these tasks at once: a pack delivered again waits on
// the claims of the first delivery, then claims nothing.
func finishSeries(ctx context.Context, tx pgx.Tx, rs []result, out []*settled, counted *[]string) (map[string]schemas.Status, error) {
	var ids []string
	var done, failed []int32
	var written, remaining, outside []int64
	var previews []*string
	for i, r := range rs {
		if out[i] == nil {
			continue
		}
		if r.Batch != 0 {
			return nil, fmt.Errorf("pack result %s: batch %d of a packed series", r.Meta.TaskID, r.Batch)
		}
		var preview *string
		if out[i].preview != nil {
			p, _ := json.Marshal(out[i].preview)
			s := string(p)
			preview = &s
		}
		ok := r.Status == schemas.StatusOK
		ids, written, previews = append(ids, r.Meta.TaskID), append(written, out[i].written), append(previews, preview)
		if ok {
			done, failed, remaining, outside = append(done, 1), append(failed, 0), append(remaining, 0), append(outside, int64(r.Outside))
		} else {
			done, failed, remaining, outside = append(done, 0), append(failed, 1), append(remaining, int64(r.Rows)), append(outside, 0)
		}
	}
	statuses := map[string]schemas.Status{}
	if len(ids) == 0 {
		return statuses, nil
	}
	rows, err := tx.Query(ctx, `
		WITH v AS (SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[])
				AS v(task_id, done, failed, written, remaining, outside, preview)),
			b AS (UPDATE regressd_task_batches AS tb SET written = v.written,
					preview = CASE WHEN v.preview IS NULL THEN tb.preview ELSE v.preview::jsonb END
				FROM v WHERE tb.task_id = v.task_id AND tb.batch_no = 0 AND (tb.written <> v.written OR v.preview IS NOT NULL))
		UPDATE regressd_tasks AS t SET
			batches_done = t.batches_done + v.done, batches_failed = t.batches_failed + v.failed,
			written = t.written + v.written, remaining = t.remaining + v.remaining, outside_range = t.outside_range + v.outside, updated = now(),
			status = CASE
				WHEN t.batches_done + v.done + t.batches_failed + v.failed < t.batches THEN 'running'
				WHEN t.batches_failed + v.failed = t.batches THEN 'failed'
				WHEN t.batches_failed + v.failed > 0 THEN 'partial'
				WHEN t.dry_run THEN 'dry_run'
				ELSE 'success' END,
			series_counted = t.series_counted OR t.batches_done + v.done + t.batches_failed + v.failed >= t.batches
		FROM v, (SELECT task_id, series_counted FROM regressd_tasks WHERE task_id = ANY($1)) AS was
		WHERE t.task_id = v.task_id AND was.task_id = v.task_id
		RETURNING t.task_id, t.status, t.series_counted AND NOT was.series_counted`, ids, done, failed, written, remaining, outside, previews)
	if err != nil {
		return nil, fmt.Errorf("ledger series update: %w", err)
	}
	var id string
	var st schemas.Status
	var newly bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &st, &newly}, func() error {
		statuses[id] = st
		if newly {
			*counted = append(*counted, id)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("ledger series update: %w", err)
	}
	return statuses, nil
}

// countEnded counts into parent, under the parent's lock (see
// handleAnnounce), the series of ids that have ended and are not counted
// yet, and those of counted, already marked counted by this transaction,
// with their progress (seriesProgress), and returns the parent's ended
// series and total; 0, 0 when the parent is not announced yet (its
// announcement counts them).
func countEnded(ctx context.Context, tx pgx.Tx, parent string, ids, counted []string) (ended, total int, err error) {
	if err := lockParent(ctx, tx, parent); err != nil {
		return 0, 0, fmt.Errorf("count series into %s: %w", parent, err)
	}
	err = tx.QueryRow(ctx, `WITH c AS (UPDATE regressd_tasks SET series_counted = true
			WHERE task_id = ANY($1) AND parent_id = $2 AND NOT series_counted AND status <> 'running' RETURNING `+seriesProgress+`),
		a AS (SELECT * FROM c UNION ALL SELECT `+seriesProgress+` FROM regressd_tasks WHERE task_id = ANY($3))
		UPDATE regressd_tasks p SET series_ended = p.series_ended + (SELECT count(*) FROM a), `+setProgress("p", "a")+`
		WHERE task_id = $2 RETURNING series_ended, series_total`, ids, parent, counted).Scan(&ended, &total)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("count series into %s: %w", parent, err)
	}
	return ended, total, nil
}

// applyEach writes a pack's results one by one (apply), counting each
// series that ended into parent, then acknowledges the pack.
func (w *Writer) applyEach(ctx context.Context, msg jetstream.Msg, parent string, rs []result) error {
	for _, r := range rs {
		if o := w.apply(ctx, r); o.err != nil {
			return w.writeFailed(ctx, msg, r, o.err)
		}
		if err := w.countIfEnded(ctx, r.Meta.TaskID, parent); err != nil {
			return err
		}
	}
	return msg.Ack()
}

// countIfEnded counts a series into its parent when it has ended.
func (w *Writer) countIfEnded(ctx context.Context, taskID, parent string) error {
	var status schemas.Status
	if err := w.pool.QueryRow(ctx, `SELECT status FROM regressd_tasks WHERE task_id = $1`, taskID).Scan(&status); err != nil {
		return fmt.Errorf("read series task %s: %w", taskID, err)
	}
	if !status.Done() {
		return nil
	}
	return w.countSeries(ctx, taskID, parent)
}

// packDeadLetter settles every series of a dead-lettered pack result as
// failed (a verdict, as a failed verdict), so that its run still ends.
func (w *Writer) packDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	raw, _, err := schemas.DecodeResultPack(dl.Header, dl.Data)
	if err != nil {
		return nil // belongs to no run we can read
	}
	slices.SortFunc(raw, func(a, b schemas.Result) int { return cmp.Compare(a.Meta.TaskID, b.Meta.TaskID) })
	parent := schemas.PackParent(dl.Header)
	for _, r := range raw {
		rr := result{Result: r}
		rr.Status, rr.Code, rr.Body = schemas.StatusFailed, http.StatusInternalServerError, nil
		rr.Message = "result dead-lettered (see 'regressd dlq list'): " + dl.Reason
		if o := w.apply(ctx, rr); o.err != nil {
			return o.err
		}
		if err := w.countIfEnded(ctx, r.Meta.TaskID, parent); err != nil {
			return err
		}
	}
	return nil
}
