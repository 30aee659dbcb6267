package tsdb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reserved names a source tag may not have: the regressed table uses them.
var Reserved = []string{"model", "source", "target", "value", "time"}

// RegressedName is the output table of a measurement.
func RegressedName(measurement string) string { return measurement + RegressedSuffix }

// Series identifies the rows of one task in its output table.
type Series struct {
	Measurement string
	Target      string
	Model       string
	// Table is the output table; empty: <measurement>_regressed. Schema is
	// its schema; empty: the session's current schema.
	Table, Schema string
	// TagColumns are all tag columns of the source, in a fixed order.
	TagColumns []string
	// Tags are the series' values; a missing key is a NULL tag.
	Tags map[string]string
	// Quantiles are the double precision columns of a prediction's
	// quantiles (p10, p90, …), added to the table when it lacks them.
	Quantiles []string
}

// Output is the name of the series' output table, without its schema.
func (s Series) Output() string {
	if s.Table != "" {
		return s.Table
	}
	return RegressedName(s.Measurement)
}

// OutputName is the output table as a person reads it: schema.table, or
// the table alone in the current schema.
func (s Series) OutputName() string {
	if s.Schema != "" {
		return s.Schema + "." + s.Output()
	}
	return s.Output()
}

// ident is the output table's quotable identifier.
func (s Series) ident() pgx.Identifier {
	if s.Schema != "" {
		return pgx.Identifier{s.Schema, s.Output()}
	}
	return pgx.Identifier{s.Output()}
}

// inSchema is the SQL that names the output table's schema's oid, with the
// schema's name as parameter $n (” for the current schema).
func inSchema(n int) string {
	return fmt.Sprintf("(SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = coalesce(nullif($%d, ''), current_schema()))", n)
}

// tagArgs returns the tag values in TagColumns order, nil for NULL.
// stagedColumns are the columns a point staged as "time" and value gets
// in the regressed table, the SELECT list that fills them, and its
// arguments: the provenance and the series' tags, bound.
func (s Series) stagedColumns() (cols, sel []string, args []any) {
	cols = []string{`"time"`, "value", "model", "source", "target"}
	sel = []string{`"time"`, "value", "$1", "$2", "$3"}
	args = []any{s.Model, s.Measurement, s.Target}
	for i, v := range s.tagArgs() {
		cols = append(cols, pgx.Identifier{s.TagColumns[i]}.Sanitize())
		args = append(args, v)
		sel = append(sel, "$"+strconv.Itoa(len(args))+"::text")
	}
	return cols, sel, args
}

func (s Series) tagArgs() []any {
	out := make([]any, len(s.TagColumns))
	for i, t := range s.TagColumns {
		if v, ok := s.Tags[t]; ok {
			out[i] = v
		}
	}
	return out
}

// ExistingTimes returns the times in [start, end) that already have a
// prediction for the series from any model. A missing output table (or
// schema) means none, and so does one without a tag column the source has
// now (it predates the column). An empty tag is the same as a NULL one, as
// in the identity index.
func (db *DB) ExistingTimes(ctx context.Context, s Series, start, end time.Time) (map[int64]struct{}, error) {
	out := map[int64]struct{}{}
	var b strings.Builder
	fmt.Fprintf(&b, `SELECT "time" FROM %s WHERE source = $1 AND target = $2 AND "time" >= $3 AND "time" < $4`,
		s.ident().Sanitize())
	args := []any{s.Measurement, s.Target, start.UTC(), end.UTC()}
	for _, t := range s.TagColumns {
		args = append(args, s.Tags[t])
		fmt.Fprintf(&b, " AND coalesce(%s, '') = $%d", pgx.Identifier{t}.Sanitize(), len(args))
	}
	rows, err := db.pool.Query(ctx, b.String(), args...)
	if err == nil {
		var t time.Time
		_, err = pgx.ForEachRow(rows, []any{&t}, func() error {
			out[t.UnixMicro()] = struct{}{}
			return nil
		})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.UndefinedTable || pgErr.Code == pgerrcode.UndefinedColumn || pgErr.Code == pgerrcode.InvalidSchemaName) {
		return map[int64]struct{}{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up existing predictions: %w", err)
	}
	return out, nil
}

// ErrRefused marks a write the output table refused for good: a data
// exception (a value too long for a column, say) or one of its integrity
// constraints (a check, a foreign key, a unique index that rows already in
// it break). Writing the same predictions again cannot succeed.
var ErrRefused = errors.New("the output table refused the predictions")

// refusal wraps err with ErrRefused when it is one. Only errors of the
// output table's own statements pass through it.
func refusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgerrcode.IsDataException(pgErr.Code) || pgerrcode.IsIntegrityConstraintViolation(pgErr.Code)) {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// identityIndex names the unique index for a tag set, so a new tag set gets a
// new index and the old one (over fewer columns) is dropped.
func identityIndex(s Series) string {
	tags := append([]string(nil), s.TagColumns...)
	sort.Strings(tags)
	// A table of the default name keeps the name its index always had; a
	// named output table, which several sources may share, is keyed by
	// itself so that they agree on one index.
	owner := s.Measurement
	if s.Table != "" {
		owner = "\x01" + s.OutputName()
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + strings.Join(tags, "\x00")))
	return "regressd_ident_" + hex.EncodeToString(sum[:8])
}

// conflictTarget is the identity (source, target, model, tags…, time); NULL
// tags compare equal through coalesce.
func conflictTarget(s Series) string {
	parts := []string{"source", "target", "model"}
	for _, t := range s.TagColumns {
		parts = append(parts, "coalesce("+pgx.Identifier{t}.Sanitize()+", '')")
	}
	parts = append(parts, `"time"`)
	return "(" + strings.Join(parts, ", ") + ")"
}

// ErrIncompatible marks an existing output table that cannot
// hold predictions (a table of the same name made by someone else): no
// retry helps until a person renames or fixes it.
var ErrIncompatible = errors.New("cannot hold predictions")

// regressedColumns are the output table's own columns and the types a
// prediction is written as.
var regressedColumns = []struct{ name, dataType, sql string }{
	{"time", "timestamp with time zone", "timestamptz"},
	{"value", "double precision", "double precision"},
	{"model", "text", "text"},
	{"source", "text", "text"},
	{"target", "text", "text"},
}

// textTypes are the column types a tag or label is written to.
var textTypes = []string{"text", "character varying"}

// CheckRegressed returns nil when the series' output table does not exist or
// can hold predictions of the series' tag columns (those it lacks are added
// when it is written); otherwise an error wrapping ErrIncompatible that
// names every problem. A table keyed on other tag columns, holding another
// source's predictions, is incompatible too (see checkIdentityTags).
func CheckRegressed(ctx context.Context, q querier, s Series) error {
	name := s.OutputName()
	// pg_catalog rather than information_schema: it runs for every task,
	// and the catalog answers in a fraction of the view's time. The
	// columns and the identity indexes are read in one round trip.
	var b pgx.Batch
	b.Queue(`
		SELECT a.attname, format_type(a.atttypid, NULL),
			a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = ''
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		WHERE c.relname = $1 AND c.relnamespace = `+inSchema(2)+`
		  AND a.attnum > 0 AND NOT a.attisdropped`, s.Output(), s.Schema)
	queueIdentityTags(&b, s)
	br := q.SendBatch(ctx, &b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("describe %s: %w", name, err)
	}
	type column struct {
		dataType string
		required bool
	}
	cols := map[string]column{}
	var c string
	var col column
	if _, err := pgx.ForEachRow(rows, []any{&c, &col.dataType, &col.required}, func() error {
		cols[c] = col
		return nil
	}); err != nil {
		return fmt.Errorf("describe %s: %w", name, err)
	}
	rows, err = br.Query()
	if err != nil {
		return fmt.Errorf("describe %s's identity: %w", name, err)
	}
	sets, err := identityTags(rows, s)
	if err != nil {
		return err
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("describe %s: %w", name, err)
	}
	if len(cols) == 0 {
		return nil // created on first write
	}
	var problems []string
	ours := map[string]bool{}
	for _, want := range regressedColumns {
		ours[want.name] = true
		switch got, ok := cols[want.name]; {
		case !ok:
			problems = append(problems, fmt.Sprintf("no column %q (%s)", want.name, want.sql))
		case got.dataType != want.dataType && !(want.sql == "text" && slices.Contains(textTypes, got.dataType)):
			problems = append(problems, fmt.Sprintf("column %q is %s, not %s", want.name, got.dataType, want.sql))
		}
	}
	for _, t := range s.TagColumns {
		ours[t] = true
		if got, ok := cols[t]; ok && !slices.Contains(textTypes, got.dataType) {
			problems = append(problems, fmt.Sprintf("tag column %q is %s, not text", t, got.dataType))
		}
	}
	problems = checkQuantileColumns(s, func(n string) (string, bool) { c, ok := cols[n]; return c.dataType, ok }, ours, problems)
	var extra []string
	for n, got := range cols {
		if !ours[n] && got.required {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	for _, n := range extra {
		problems = append(problems, fmt.Sprintf("column %q is NOT NULL with no default, and predictions have no value for it", n))
	}
	if len(problems) == 0 {
		problem, err := checkIdentityTags(ctx, q, s, sets)
		if err != nil || problem == "" {
			return err
		}
		return fmt.Errorf("output table %q %w of source %q: %s", name, ErrIncompatible, s.Measurement, problem)
	}
	return fmt.Errorf("table %q exists but %w: %s; rename or drop it (regressd creates it on the first write), or fix those columns",
		name, ErrIncompatible, strings.Join(problems, "; "))
}

// EnsureRegressed creates the series' output table (and its schema), adds
// tag columns it lacks and keeps its identity index in step with the tag
// set. Idempotent. A table of that name that cannot hold predictions is an
// ErrIncompatible error.
func EnsureRegressed(ctx context.Context, tx pgx.Tx, s Series) error {
	if err := CheckRegressed(ctx, tx, s); err != nil {
		return err
	}
	if s.Schema != "" {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{s.Schema}.Sanitize()); err != nil {
			return fmt.Errorf("create schema %s: %w", s.Schema, err)
		}
	}
	tbl := s.ident().Sanitize()
	var b strings.Builder
	fmt.Fprintf(&b, `CREATE TABLE IF NOT EXISTS %s ("time" timestamptz NOT NULL, value double precision NOT NULL, model text NOT NULL, source text NOT NULL, target text NOT NULL`, tbl)
	for _, t := range s.TagColumns {
		fmt.Fprintf(&b, ", %s text", pgx.Identifier{t}.Sanitize())
	}
	b.WriteString(")")
	if _, err := tx.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("create %s: %w", s.OutputName(), err)
	}
	for _, t := range s.TagColumns {
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s text", tbl, pgx.Identifier{t}.Sanitize())); err != nil {
			return fmt.Errorf("alter %s: %w", s.OutputName(), err)
		}
	}
	if err := addQuantileColumns(ctx, tx, s, tbl); err != nil {
		return err
	}
	idx := identityIndex(s)
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s %s",
		pgx.Identifier{idx}.Sanitize(), tbl, conflictTarget(s))); err != nil {
		return refusal(fmt.Errorf("index %s: %w", s.OutputName(), err))
	}
	// Older identity indexes cover fewer tags and would merge distinct series.
	rows, err := tx.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = $1 AND indexname LIKE 'regressd_ident_%' AND indexname <> $2
		AND schemaname = coalesce(nullif($3, ''), current_schema())`, s.Output(), idx, s.Schema)
	if err != nil {
		return err
	}
	var stale []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		stale = append(stale, n)
	}
	rows.Close()
	for _, n := range stale {
		drop := pgx.Identifier{n}
		if s.Schema != "" {
			drop = pgx.Identifier{s.Schema, n}
		}
		if _, err := tx.Exec(ctx, "DROP INDEX IF EXISTS "+drop.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// Point is one prediction to write.
type Point struct {
	Time  time.Time
	Value float64
}

// WritePredictions writes points for the series inside tx; writing a point
// again replaces its value. It returns the number of rows written.
func WritePredictions(ctx context.Context, tx pgx.Tx, s Series, points []Point) (int64, error) {
	n, err := WriteGroup(ctx, tx, []Write{{Series: s, Points: points}})
	if err != nil {
		return 0, err
	}
	return n[0], nil
}

// Write is one series' points.
type Write struct {
	Series Series
	Points []Point
	// KeepExisting keeps a point already in the table (skip_existing): it
	// is neither replaced nor counted as written.
	KeepExisting bool
	// Quantiles[i] are Points[i]'s values of Series.Quantiles' columns, in
	// order; a NaN, or a missing one, is NULL.
	Quantiles [][]float64
}

// WriteGroup writes several series' points inside tx (WritePredictions for
// each) and returns the rows written for each.
//
// Most writes are of points not there yet (skip_existing drops the others
// before the model is called), so the points are first COPYed straight into
// the table, under a savepoint: the write limit of the table. The writes
// into one table with one tag set share that COPY. A point that is there
// already (a re-run, a timestamp twice) fails the COPY on the identity
// index; the savepoint then undoes it and the writes are upserted one by
// one instead: COPY into a per-session staging table, then one
// INSERT … ON CONFLICT.
func WriteGroup(ctx context.Context, tx pgx.Tx, ws []Write) ([]int64, error) {
	out := make([]int64, len(ws))
	taken := make([]bool, len(ws))
	for i := range ws {
		if taken[i] {
			continue
		}
		var same []int
		for j := i; j < len(ws); j++ {
			if !taken[j] && sameTable(ws[i].Series, ws[j].Series) {
				same, taken[j] = append(same, j), true
			}
		}
		copyErr := copyNew(ctx, tx, ws, same)
		var pgErr *pgconn.PgError
		if copyErr != nil && (!errors.As(copyErr, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation) {
			return nil, refusal(copyErr)
		}
		for _, j := range same {
			if copyErr == nil || len(ws[j].Points) == 0 {
				out[j] = int64(len(ws[j].Points))
				continue
			}
			n, err := upsert(ctx, tx, ws[j].Series, ws[j].Points, ws[j].KeepExisting, ws[j].Quantiles)
			if err != nil {
				return nil, refusal(err)
			}
			out[j] = n
		}
	}
	return out, nil
}

// sameTable reports whether two series are written into one table with the
// same columns.
func sameTable(a, b Series) bool {
	return a.Schema == b.Schema && a.Output() == b.Output() && slices.Equal(a.TagColumns, b.TagColumns) && slices.Equal(a.Quantiles, b.Quantiles)
}

// copyNew COPYs the points of ws[which] (one table, one tag set) into the
// regressed table under a savepoint, which a failure rolls back. A savepoint
// that was not needed is left to the commit (releasing it would cost a
// round trip for nothing).
func copyNew(ctx context.Context, tx pgx.Tx, ws []Write, which []int) error {
	total := 0
	for _, j := range which {
		total += len(ws[j].Points)
	}
	if total == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT regressd_copy`); err != nil {
		return fmt.Errorf("write predictions: %w", err)
	}
	s := ws[which[0]].Series
	cols := append(append([]string{"time", "value", "model", "source", "target"}, s.TagColumns...), s.Quantiles...)
	nq := len(s.Quantiles)
	var row []any
	k, i := -1, 0 // ws[which[k]].Points[i] is the next point
	_, err := tx.CopyFrom(ctx, s.ident(), cols, pgx.CopyFromFunc(func() ([]any, error) {
		for k < 0 || i == len(ws[which[k]].Points) {
			if k++; k == len(which) {
				return nil, nil
			}
			w := ws[which[k]].Series
			row, i = append(append([]any{nil, nil, w.Model, w.Measurement, w.Target}, w.tagArgs()...), make([]any, nq)...), 0
		}
		p := ws[which[k]].Points[i]
		row[0], row[1] = p.Time, p.Value
		quantileArgs(row[len(row)-nq:], ws[which[k]].Quantiles, i)
		i++
		return row, nil
	}))
	if err != nil {
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT regressd_copy`); rerr != nil {
			return fmt.Errorf("copy predictions: %w (and rolling back: %v)", err, rerr)
		}
		return fmt.Errorf("copy predictions: %w", err)
	}
	return nil
}

// upsert writes points that may exist: COPY into a per-session staging
// table, then one INSERT … ON CONFLICT that also empties the staging table
// (DELETE … RETURNING: a TRUNCATE would swap the table's files on every
// call, which cost more than the write at a few hundred rows).
func upsert(ctx context.Context, tx pgx.Tx, s Series, points []Point, keep bool, quantiles [][]float64) (int64, error) {
	if len(s.Quantiles) > 0 {
		return upsertQuantiles(ctx, tx, s, points, keep, quantiles)
	}
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS regressd_stage ("time" timestamptz NOT NULL, value double precision NOT NULL) ON COMMIT DELETE ROWS`); err != nil {
		return 0, fmt.Errorf("staging table: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"regressd_stage"}, []string{"time", "value"}, pgx.CopyFromSlice(len(points), func(i int) ([]any, error) {
		return []any{points[i].Time, points[i].Value}, nil
	})); err != nil {
		return 0, fmt.Errorf("copy predictions: %w", err)
	}
	cols, sel, args := s.stagedColumns()
	return insertStaged(ctx, tx, s, keep, `regressd_stage RETURNING "time", value`, cols, sel, args, "value = EXCLUDED.value")
}

// insertStaged empties a staging table (stage: its name and RETURNING
// list) into s's table, its columns cols taken from the staged rows by
// sel (args bound): on a conflict the point is kept (keep) or its set
// columns replaced, with the quantile columns this write has not NULLed.
func insertStaged(ctx context.Context, tx pgx.Tx, s Series, keep bool, stage string, cols, sel []string, args []any, set string) (int64, error) {
	onConflict := "DO UPDATE SET " + set
	if keep {
		onConflict = "DO NOTHING"
	} else if stale, err := clearStaleQuantiles(ctx, tx, s); err != nil {
		return 0, err
	} else {
		onConflict += stale
	}
	// DISTINCT ON keeps one value per time should a batch repeat a timestamp.
	sql := fmt.Sprintf(`WITH staged AS (DELETE FROM %s)
		INSERT INTO %s (%s) SELECT DISTINCT ON ("time") %s FROM staged ORDER BY "time" ON CONFLICT %s %s`,
		stage, s.ident().Sanitize(), strings.Join(cols, ", "), strings.Join(sel, ", "), conflictTarget(s), onConflict)
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return 0, fmt.Errorf("write predictions: %w", err)
	}
	return tag.RowsAffected(), nil
}
