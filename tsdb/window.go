package tsdb

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/schemas"
)

// WindowQuery selects the rows of one run.
type WindowQuery struct {
	Measurement string
	Target      string
	Features    []string
	// TagColumns are read so the caller can tell series apart.
	TagColumns []string
	// Filter keeps rows whose tags equal these values; an empty value keeps
	// the rows with no value there (NULL or '').
	Filter map[string]string
	// Start is inclusive, End exclusive.
	Start, End time.Time
	// Limit keeps the newest rows; 0 means no limit.
	Limit int
	// LocalTime says the time column is timestamp without time zone
	// (Table.LocalTime): the bounds are turned into the session zone's wall
	// clock, so the column is compared as it is stored (and indexed).
	LocalTime bool
	// Decimal names the target and feature columns of type numeric, which
	// can hold values past double precision's range: those read as empty,
	// as ±Inf does, instead of failing the read (SQLSTATE 22003).
	Decimal map[string]bool
}

// Window is a window of rows in ascending time order as one Arrow record:
// time, the tag columns (utf8, nullable), the target and the features
// (float64, nullable; NaN and ±Inf read as null).
type Window struct {
	Record    arrow.RecordBatch
	Truncated bool
}

// Release frees the record.
func (w *Window) Release() {
	if w.Record != nil {
		w.Record.Release()
	}
}

// WindowSchema is the Arrow schema ReadWindow returns.
func WindowSchema(q WindowQuery) *arrow.Schema {
	fs := []arrow.Field{{Name: schemas.ColTime, Type: schemas.TimeType}}
	for _, t := range q.TagColumns {
		fs = append(fs, arrow.Field{Name: t, Type: arrow.BinaryTypes.String, Nullable: true})
	}
	fs = append(fs, arrow.Field{Name: q.Target, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	for _, f := range q.Features {
		fs = append(fs, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
	}
	return arrow.NewSchema(fs, nil)
}

// ReadWindow reads the newest Limit rows of [Start, End), returned oldest first.
func (db *DB) ReadWindow(ctx context.Context, q WindowQuery) (*Window, error) {
	sql, args := windowSQL(q)
	rows, err := db.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read window of %q: %w", q.Measurement, err)
	}
	defer rows.Close()
	c, _ := db.cols.Get().(*windowCols)
	if c == nil {
		c = &windowCols{}
	}
	defer db.cols.Put(c)
	c.reset(len(q.TagColumns), 1+len(q.Features))
	binaryRows := false
	for first := true; rows.Next(); first = false {
		if first {
			binaryRows = c.binary(rows.FieldDescriptions())
		}
		if binaryRows {
			err = c.appendRaw(rows.RawValues())
		} else {
			err = c.appendScanned(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("read window of %q: %w", q.Measurement, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read window of %q: %w", q.Measurement, err)
	}
	w := &Window{}
	if q.Limit > 0 && len(c.times) > q.Limit {
		w.Truncated = true
		c.cut(q.Limit)
	}
	w.Record = buildWindow(q, c)
	return w, nil
}

// windowSQL reads newest first so a limit keeps the most recent rows; one
// extra row tells the caller the read was cut.
func windowSQL(q WindowQuery) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT ")
	b.WriteString(pgx.Identifier{"time"}.Sanitize())
	b.WriteString("::timestamptz")
	for _, t := range q.TagColumns {
		b.WriteString(", ")
		b.WriteString(pgx.Identifier{t}.Sanitize())
		b.WriteString("::text")
	}
	for _, f := range append([]string{q.Target}, q.Features...) {
		id := pgx.Identifier{f}.Sanitize()
		b.WriteString(", ")
		if q.Decimal[f] {
			b.WriteString("CASE WHEN abs(" + id + ") <= 1.7976931348623157e308 THEN " + id + "::double precision END")
		} else {
			b.WriteString(id + "::double precision")
		}
	}
	b.WriteString(" FROM ")
	b.WriteString(pgx.Identifier{q.Measurement}.Sanitize())
	if q.LocalTime {
		b.WriteString(` WHERE "time" >= ($1::timestamptz AT TIME ZONE current_setting('TimeZone')) AND "time" < ($2::timestamptz AT TIME ZONE current_setting('TimeZone'))`)
	} else {
		b.WriteString(` WHERE "time" >= $1 AND "time" < $2`)
	}
	args := []any{q.Start.UTC(), q.End.UTC()}
	keys := make([]string, 0, len(q.Filter))
	for k := range q.Filter {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, q.Filter[k])
		b.WriteString(" AND ")
		// An empty value is "no tag value": NULL and '' alike, as in the
		// output table's identity. A value keeps the plain comparison (and
		// the source's indexes).
		if q.Filter[k] == "" {
			b.WriteString("coalesce(" + pgx.Identifier{k}.Sanitize() + "::text, '')")
		} else {
			b.WriteString(pgx.Identifier{k}.Sanitize() + "::text")
		}
		b.WriteString(" = $")
		b.WriteString(strconv.Itoa(len(args)))
	}
	b.WriteString(` ORDER BY "time" DESC`)
	if q.Limit > 0 {
		args = append(args, q.Limit+1)
		b.WriteString(" LIMIT $")
		b.WriteString(strconv.Itoa(len(args)))
	}
	return b.String(), args
}

// buildWindow assembles the record in ascending time order from rows read
// newest first.
func buildWindow(q WindowQuery, c *windowCols) arrow.RecordBatch {
	n := len(c.times)
	mem := memory.DefaultAllocator
	cols := make([]arrow.Array, 0, 1+len(c.tags)+len(c.nums))

	tb := array.NewTimestampBuilder(mem, schemas.TimeType)
	tb.Reserve(n)
	for i := n - 1; i >= 0; i-- {
		tb.UnsafeAppend(arrow.Timestamp(c.times[i]))
	}
	cols = append(cols, tb.NewArray())
	tb.Release()

	for _, col := range c.tags {
		sb := array.NewStringBuilder(mem)
		sb.Reserve(n)
		sb.ReserveData(len(col.data))
		for i := n - 1; i >= 0; i-- {
			if v, ok := col.value(i); ok {
				sb.BinaryBuilder.Append(v)
			} else {
				sb.AppendNull()
			}
		}
		cols = append(cols, sb.NewArray())
		sb.Release()
	}
	for _, col := range c.nums {
		fb := array.NewFloat64Builder(mem)
		fb.Reserve(n)
		for i := n - 1; i >= 0; i-- {
			if math.IsNaN(col[i]) {
				fb.UnsafeAppendBoolToBitmap(false)
			} else {
				fb.UnsafeAppend(col[i])
			}
		}
		cols = append(cols, fb.NewArray())
		fb.Release()
	}
	rec := array.NewRecordBatch(WindowSchema(q), cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}
