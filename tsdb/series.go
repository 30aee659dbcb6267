package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/schemas"
)

// ErrNoColumn means a measurement lacks a column a series names.
var ErrNoColumn = errors.New("no such column")

// ErrManySeries means a window holds more than one series (tag
// combination) and no filter chose one.
var ErrManySeries = errors.New("more than one series")

// Interval column names: <measurement>_regressed may carry a prediction
// interval as p10 and p90. They are optional; SeriesView reads them when
// both are there.
const (
	ColP10 = "p10"
	ColP90 = "p90"
)

// SeriesQuery selects one series of a measurement for viewing: its target
// over [Start, End) and the predictions regressd wrote for it.
type SeriesQuery struct {
	Measurement string
	Target      string
	// Filter keeps rows whose tags equal these values.
	Filter map[string]string
	// Start is inclusive, End exclusive.
	Start, End time.Time
	// Limit keeps the newest rows of each of the two reads; 0 means no limit.
	Limit int
}

// SeriesView is a series and its filled points, oldest first.
type SeriesView struct {
	// Tags are the series' tag values: those of the rows in the window
	// (all tag columns; a NULL tag is absent), or the filter when the
	// window has no rows.
	Tags     map[string]string
	Observed []schemas.ObservedPoint
	Filled   []schemas.FilledPoint
	// Intervals says the output table has p10 and p90 columns.
	Intervals bool
	// ObservedTruncated and FilledTruncated say Limit cut a read.
	ObservedTruncated, FilledTruncated bool
}

// ReadSeries reads a series for viewing. More than one tag combination in
// the window is ErrManySeries, naming up to three; a missing measurement is
// ErrNoTable; a missing output table means no filled points.
func (db *DB) ReadSeries(ctx context.Context, q SeriesQuery) (SeriesView, error) {
	var v SeriesView
	tbl, err := db.Describe(ctx, q.Measurement)
	if err != nil {
		return v, err
	}
	if c, ok := tbl.Column(q.Target); !ok || c.Kind != KindField {
		return v, fmt.Errorf("measurement %q: %w: no numeric column %q", q.Measurement, ErrNoColumn, q.Target)
	}
	tags := tbl.Tags()
	for k := range q.Filter {
		if !slices.Contains(tags, k) {
			return v, fmt.Errorf("measurement %q: %w: no tag column %q", q.Measurement, ErrNoColumn, k)
		}
	}
	w, err := db.ReadWindow(ctx, WindowQuery{Measurement: q.Measurement, Target: q.Target, TagColumns: tags,
		Filter: q.Filter, Start: q.Start, End: q.End, Limit: q.Limit})
	if err != nil {
		return v, err
	}
	defer w.Release()
	v.ObservedTruncated = w.Truncated
	if v.Tags, err = oneSeries(w, tags); err != nil {
		return v, err
	}
	complete := v.Tags != nil // every tag column's value is known
	if !complete {
		v.Tags = map[string]string{}
		for k, val := range q.Filter {
			v.Tags[k] = val
		}
	}
	rec := w.Record
	times := rec.Column(0).(*array.Timestamp)
	target := rec.Column(1 + len(tags)).(*array.Float64)
	v.Observed = make([]schemas.ObservedPoint, rec.NumRows())
	for i := range v.Observed {
		v.Observed[i].Time = time.UnixMicro(int64(times.Value(i))).UTC()
		if target.IsValid(i) {
			val := target.Value(i)
			v.Observed[i].Value = &val
		}
	}
	if err := db.readFilled(ctx, q, tags, complete, &v); err != nil {
		return v, err
	}
	return v, nil
}

// oneSeries returns the tag values shared by every row of w (nil for no
// rows), or ErrManySeries naming up to three combinations.
func oneSeries(w *Window, tags []string) (map[string]string, error) {
	rec := w.Record
	n := int(rec.NumRows())
	if n == 0 {
		return nil, nil
	}
	key := func(i int) string {
		var b strings.Builder
		for j := range tags {
			col := rec.Column(1 + j).(*array.String)
			if col.IsNull(i) {
				b.WriteString("\x00null")
			} else {
				b.WriteString(col.Value(i))
			}
			b.WriteByte(0)
		}
		return b.String()
	}
	describe := func(i int) string {
		var parts []string
		for j, t := range tags {
			if col := rec.Column(1 + j).(*array.String); col.IsValid(i) {
				parts = append(parts, t+":"+col.Value(i))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	seen := map[string]bool{key(0): true}
	names := []string{describe(0)}
	for i := 1; i < n && len(names) < 4; i++ {
		if k := key(i); !seen[k] {
			seen[k] = true
			names = append(names, describe(i))
		}
	}
	if len(names) > 1 {
		more := ""
		if len(names) > 3 {
			names, more = names[:3], " and more"
		}
		return nil, fmt.Errorf("%w in the window: %s%s; choose one with tags", ErrManySeries, strings.Join(names, ", "), more)
	}
	out := map[string]string{}
	for j, t := range tags {
		if col := rec.Column(1 + j).(*array.String); col.IsValid(0) {
			out[t] = col.Value(0)
		}
	}
	return out, nil
}

// readFilled reads the series' predictions from <measurement>_regressed:
// rows of this source and target whose tag columns equal the series' tags;
// when complete, a tag the series lacks must be NULL there too. Points
// with a non-finite value are left out; non-finite bounds read as none.
func (db *DB) readFilled(ctx context.Context, q SeriesQuery, tags []string, complete bool, v *SeriesView) error {
	name := RegressedName(q.Measurement)
	out, err := db.Describe(ctx, name)
	if errors.Is(err, ErrNoTable) {
		return nil
	}
	if err != nil {
		return err
	}
	p10, ok10 := out.Column(ColP10)
	p90, ok90 := out.Column(ColP90)
	v.Intervals = ok10 && ok90 && p10.Kind == KindField && p90.Kind == KindField
	var b strings.Builder
	b.WriteString(`SELECT "time", value, model`)
	if v.Intervals {
		b.WriteString(`, p10::double precision, p90::double precision`)
	}
	fmt.Fprintf(&b, ` FROM %s WHERE source = $1 AND target = $2 AND "time" >= $3 AND "time" < $4
		AND value NOT IN ('NaN', 'Infinity', '-Infinity')`, pgx.Identifier{name}.Sanitize())
	args := []any{q.Measurement, q.Target, q.Start.UTC(), q.End.UTC()}
	// Every tag column of the source, in a fixed order: the series' value
	// or NULL. A column the output table lacks holds NULL for all its rows.
	sorted := slices.Clone(tags)
	sort.Strings(sorted)
	for _, t := range sorted {
		val, set := v.Tags[t]
		if _, ok := out.Column(t); !ok {
			if set {
				return nil // predictions of this series cannot be there
			}
			continue
		}
		if set && val != "" {
			args = append(args, val)
			fmt.Fprintf(&b, " AND %s = $%d", pgx.Identifier{t}.Sanitize(), len(args))
		} else if set || complete {
			// No value: written as NULL, and '' reads alike.
			fmt.Fprintf(&b, " AND coalesce(%s, '') = ''", pgx.Identifier{t}.Sanitize())
		}
	}
	b.WriteString(` ORDER BY "time" DESC, model`)
	if q.Limit > 0 {
		args = append(args, q.Limit+1)
		fmt.Fprintf(&b, " LIMIT $%d", len(args))
	}
	rows, err := db.pool.Query(ctx, b.String(), args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	dest := func(p *schemas.FilledPoint) []any {
		d := []any{&p.Time, &p.Value, &p.Model}
		if v.Intervals {
			d = append(d, &p.P10, &p.P90)
		}
		return d
	}
	var p schemas.FilledPoint
	if _, err := pgx.ForEachRow(rows, dest(&p), func() error {
		p.Time = p.Time.UTC()
		p.P10, p.P90 = finite(p.P10), finite(p.P90)
		v.Filled = append(v.Filled, p)
		p.P10, p.P90 = nil, nil // fresh pointers for the next row
		return nil
	}); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if q.Limit > 0 && len(v.Filled) > q.Limit {
		v.Filled, v.FilledTruncated = v.Filled[:q.Limit], true
	}
	slices.Reverse(v.Filled)
	return nil
}

// finite returns p, or nil when it points at NaN or ±Inf (which JSON
// cannot carry).
func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	return p
}
