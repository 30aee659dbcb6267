package tsdb

// Many series in one run (group_by): the lookups that serve every series at
// once, and the ledger's series of a run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/regressd/regressd/schemas"
)

// SeriesKey keys a series by its values of every tag column, in order; a
// missing tag is the same as an empty one, as in the identity index.
func SeriesKey(tagColumns []string, tags map[string]string) string {
	var b strings.Builder
	for i, c := range tagColumns {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(tags[c])
	}
	return b.String()
}

// ExistingBySeries returns, for every series of s's source and target (the
// tags of s are ignored), the times in [start, end) that already have a
// prediction from any model, keyed by SeriesKey: one query for all series.
// A missing output table means none, as in ExistingTimes.
func (db *DB) ExistingBySeries(ctx context.Context, s Series, start, end time.Time) (map[string]map[int64]struct{}, error) {
	out := map[string]map[int64]struct{}{}
	var b strings.Builder
	b.WriteString(`SELECT "time"`)
	for _, t := range s.TagColumns {
		fmt.Fprintf(&b, ", coalesce(%s::text, '')", pgx.Identifier{t}.Sanitize())
	}
	fmt.Fprintf(&b, ` FROM %s WHERE source = $1 AND target = $2 AND "time" >= $3 AND "time" < $4`, s.ident().Sanitize())
	rows, err := db.pool.Query(ctx, b.String(), s.Measurement, s.Target, start.UTC(), end.UTC())
	if err == nil {
		var t time.Time
		vals := make([]string, len(s.TagColumns))
		dst := []any{&t}
		for i := range vals {
			dst = append(dst, &vals[i])
		}
		_, err = pgx.ForEachRow(rows, dst, func() error {
			k := strings.Join(vals, "\x00")
			m := out[k]
			if m == nil {
				m = map[int64]struct{}{}
				out[k] = m
			}
			m[t.UnixMicro()] = struct{}{}
			return nil
		})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.UndefinedTable || pgErr.Code == pgerrcode.UndefinedColumn || pgErr.Code == pgerrcode.InvalidSchemaName) {
		return map[string]map[int64]struct{}{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up existing predictions: %w", err)
	}
	return out, nil
}

// Querier is what reads the ledger: a pool or a transaction.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// SeriesOutcome counts a series task's status: succeeded (success,
// dry_run), skipped, failed (failed, partial); false while it runs.
func SeriesOutcome(c *schemas.SeriesCounts, status schemas.Status, n int) bool {
	switch status {
	case schemas.StatusSuccess, schemas.StatusDryRun:
		c.Succeeded += n
	case schemas.StatusSkipped:
		c.Skipped += n
	case schemas.StatusFailed, schemas.StatusPartial:
		c.Failed += n
	default:
		return false
	}
	return true
}

// RunSeries returns the series of a group_by run from the ledger: their
// counts (Total is the run's series_total; 0 when taskID is no group_by
// run) and the first limit of them by tags, with a dry run's predictions
// when previews is set.
func RunSeries(ctx context.Context, db Querier, taskID string, limit int, previews bool) (schemas.SeriesCounts, []schemas.SeriesResult, error) {
	var c schemas.SeriesCounts
	err := db.QueryRow(ctx, `SELECT series_total FROM regressd_tasks WHERE task_id = $1`, taskID).Scan(&c.Total)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && c.Total == 0 {
		return c, nil, nil
	}
	if err != nil {
		return c, nil, fmt.Errorf("read series of %s: %w", taskID, err)
	}
	rows, err := db.Query(ctx, `SELECT status, count(*) FROM regressd_tasks WHERE parent_id = $1 GROUP BY status`, taskID)
	if err != nil {
		return c, nil, fmt.Errorf("read series of %s: %w", taskID, err)
	}
	var st schemas.Status
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		SeriesOutcome(&c, st, n)
		return nil
	}); err != nil {
		return c, nil, fmt.Errorf("read series of %s: %w", taskID, err)
	}
	rows, err = db.Query(ctx, `SELECT t.task_id, t.series, t.status, t.written, t.skipped_existing,
		CASE WHEN t.message <> '' THEN t.message ELSE coalesce((SELECT b.message FROM regressd_task_batches b
			WHERE b.task_id = t.task_id AND b.status = 'failed' ORDER BY b.batch_no LIMIT 1), '') END
		FROM regressd_tasks t WHERE t.parent_id = $1 ORDER BY t.series::text, t.task_id LIMIT $2`, taskID, limit)
	if err != nil {
		return c, nil, fmt.Errorf("read series of %s: %w", taskID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (schemas.SeriesResult, error) {
		var r schemas.SeriesResult
		var tags []byte
		err := row.Scan(&r.TaskID, &tags, &r.Status, &r.Written, &r.SkippedExisting, &r.Message)
		if err == nil && len(tags) > 0 {
			err = json.Unmarshal(tags, &r.Tags)
		}
		return r, err
	})
	if err != nil || !previews || len(out) == 0 {
		return c, out, err
	}
	ids := make([]string, len(out))
	at := map[string]int{}
	for i, r := range out {
		ids[i], at[r.TaskID] = r.TaskID, i
	}
	rows, err = db.Query(ctx, `SELECT task_id, preview FROM regressd_task_batches WHERE task_id = ANY($1) AND preview IS NOT NULL
		ORDER BY task_id, batch_no`, ids)
	if err != nil {
		return c, out, fmt.Errorf("read series predictions of %s: %w", taskID, err)
	}
	var id string
	var b []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &b}, func() error {
		var p []schemas.Prediction
		if err := json.Unmarshal(b, &p); err != nil {
			return err
		}
		for i := range p {
			p[i].Time = p[i].Time.UTC()
		}
		r := &out[at[id]]
		r.Predictions = append(r.Predictions, p...)
		return nil
	})
	return c, out, err
}

// maxReportSeries bounds the series a run's report lists.
const maxReportSeries = 100_000

// RunSeries is a group_by run's series for its report: their counts and
// every one of them (up to maxReportSeries), with a dry run's predictions.
func (db *DB) RunSeries(ctx context.Context, taskID string) (schemas.SeriesCounts, []schemas.SeriesResult, error) {
	var dry bool
	db.pool.QueryRow(ctx, `SELECT dry_run FROM regressd_tasks WHERE task_id = $1`, taskID).Scan(&dry)
	return RunSeries(ctx, db.pool, taskID, maxReportSeries, dry)
}
