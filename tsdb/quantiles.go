package tsdb

// Quantile columns of a regressed table (p10, p90, …): double precision,
// added when a task first writes them (older rows NULL), written beside the
// value.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// checkQuantileColumns adds to problems a quantile column that an existing
// table holds with another type, or that is also a tag or provenance
// column; the columns are marked as ours. typeOf answers a column's type.
func checkQuantileColumns(s Series, typeOf func(string) (string, bool), ours map[string]bool, problems []string) []string {
	for _, q := range s.Quantiles {
		switch {
		case slices.Contains(s.TagColumns, q):
			problems = append(problems, fmt.Sprintf("quantile column %q is also a tag column", q))
		case slices.Contains(Reserved, q):
			problems = append(problems, fmt.Sprintf("quantile column %q is a provenance column", q))
		default:
			if t, ok := typeOf(q); ok && t != "double precision" {
				problems = append(problems, fmt.Sprintf("quantile column %q is %s, not double precision", q, t))
			}
		}
		ours[q] = true
	}
	return problems
}

// addQuantileColumns adds the quantile columns the table lacks.
func addQuantileColumns(ctx context.Context, tx pgx.Tx, s Series, tbl string) error {
	for _, q := range s.Quantiles {
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s double precision", tbl, pgx.Identifier{q}.Sanitize())); err != nil {
			return fmt.Errorf("alter %s: %w", s.OutputName(), err)
		}
	}
	return nil
}

// quantileArgs fills dst with point i's quantiles, nil (NULL) where none.
func quantileArgs(dst []any, quantiles [][]float64, i int) {
	var row []float64
	if i < len(quantiles) {
		row = quantiles[i]
	}
	for k := range dst {
		dst[k] = nil
		if k < len(row) && !math.IsNaN(row[k]) && !math.IsInf(row[k], 0) {
			dst[k] = row[k]
		}
	}
}

// upsertQuantiles is upsert for a series with quantile columns: the
// quantiles are staged as an array beside the value.
func upsertQuantiles(ctx context.Context, tx pgx.Tx, s Series, points []Point, keep bool, quantiles [][]float64) (int64, error) {
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS regressd_stage_q ("time" timestamptz NOT NULL, value double precision NOT NULL, q double precision[]) ON COMMIT DELETE ROWS`); err != nil {
		return 0, fmt.Errorf("staging table: %w", err)
	}
	nq := len(s.Quantiles)
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"regressd_stage_q"}, []string{"time", "value", "q"}, pgx.CopyFromSlice(len(points), func(i int) ([]any, error) {
		qs := make([]any, nq)
		quantileArgs(qs, quantiles, i)
		arr := make([]*float64, nq)
		for k, v := range qs {
			if f, ok := v.(float64); ok {
				arr[k] = &f
			}
		}
		return []any{points[i].Time, points[i].Value, arr}, nil
	})); err != nil {
		return 0, fmt.Errorf("copy predictions: %w", err)
	}
	cols, sel, args := s.stagedColumns()
	set := []string{"value = EXCLUDED.value"}
	for k, q := range s.Quantiles {
		id := pgx.Identifier{q}.Sanitize()
		cols = append(cols, id)
		sel = append(sel, "q["+strconv.Itoa(k+1)+"]")
		set = append(set, id+" = EXCLUDED."+id)
	}
	return insertStaged(ctx, tx, s, keep, `regressd_stage_q RETURNING "time", value, q`, cols, sel, args, strings.Join(set, ", "))
}

// clearStaleQuantiles is the SQL that sets to NULL, in a replaced point,
// the quantile columns (p<digits>[_<digits>], double precision) the table
// has but the series does not write: they belonged to the point replaced.
// "" when there are none. It costs a catalog read, only on the upsert
// path (points written again).
func clearStaleQuantiles(ctx context.Context, tx pgx.Tx, s Series) (string, error) {
	rows, err := tx.Query(ctx, `
		SELECT a.attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
		WHERE c.relname = $1 AND c.relnamespace = `+inSchema(2)+`
		  AND a.attnum > 0 AND NOT a.attisdropped AND a.attname ~ '^p[0-9]+(_[0-9]+)?$'
		  AND format_type(a.atttypid, NULL) = 'double precision' AND NOT a.attname = ANY($3)
		ORDER BY a.attnum`, s.Output(), s.Schema, append([]string{}, s.Quantiles...))
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", s.OutputName(), err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", s.OutputName(), err)
	}
	var b strings.Builder
	for _, n := range names {
		if slices.Contains(s.TagColumns, n) {
			continue
		}
		b.WriteString(", " + pgx.Identifier{n}.Sanitize() + " = NULL")
	}
	return b.String(), nil
}
