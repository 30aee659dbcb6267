package producer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// CheckSchema checks the table against the run's arguments before any row is
// read: the columns exist, target and features are numeric, tag filters name
// tag columns, and no source tag collides with the provenance tags. Every
// problem names the column and the fix.
func CheckSchema(t tsdb.Table, a schemas.RunArgs) error {
	var errs []error
	if c, ok := t.Column("time"); !ok || c.Kind != tsdb.KindTime {
		errs = append(errs, fmt.Errorf("table %q has no timestamp column named \"time\" (timestamptz): add one or point the trigger at a time-series table", t.Name))
	}
	numeric := func(role, name string) {
		c, ok := t.Column(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s %q is not a column of %q (columns: %s)", role, name, t.Name, columnList(t)))
		case c.Kind != tsdb.KindField:
			errs = append(errs, fmt.Errorf("%s %q is of type %s, not numeric: encode it as a number first or choose a numeric column", role, name, c.DataType))
		}
	}
	numeric("field", a.Field)
	for _, f := range a.FeatureFields {
		numeric("feature", f)
	}
	for k := range a.Tags {
		c, ok := t.Column(k)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("tag %q in tags is not a column of %q (tag columns: %s)", k, t.Name, strings.Join(t.Tags(), ", ")))
		case c.Kind != tsdb.KindTag:
			errs = append(errs, fmt.Errorf("tag %q in tags is a %s column, not a tag (text) column: filter on a tag column", k, c.DataType))
		}
	}
	out := cmp.Or(a.OutputMeasurement, tsdb.RegressedName(t.Name))
	for _, tag := range t.Tags() {
		if slices.Contains(tsdb.Reserved, tag) {
			errs = append(errs, fmt.Errorf("source tag column %q collides with the provenance columns of %s (%s): rename it in the source table", tag, out, strings.Join(tsdb.Reserved, ", ")))
		}
	}
	errs = append(errs, checkQuantileColumns(t, a)...)
	return errors.Join(errs...)
}

// TableCheck returns a check for trigger creation: the measurement exists,
// the columns named so far fit (a request trigger may leave some to the
// request body), and an output table already there can take its rows.
func TableCheck(db *tsdb.DB) func(ctx context.Context, a schemas.RunArgs) error {
	return func(ctx context.Context, a schemas.RunArgs) error {
		t, err := db.Describe(ctx, a.Measurement)
		if errors.Is(err, tsdb.ErrNoTable) {
			return fmt.Errorf("measurement %q does not exist: create the table first or fix the measurement argument", a.Measurement)
		}
		if err != nil {
			return err
		}
		if a.Field == "" {
			// Check the named columns only; the field comes with the request.
			a.Field = firstField(t)
		}
		// The output table, when there, must take this source's tag columns.
		out := tsdb.Series{Measurement: a.Measurement, Table: a.OutputMeasurement, Schema: a.OutputSchema,
			TagColumns: t.Tags(), Quantiles: schemas.QuantileColumns(a.Quantiles)}
		outErr := tsdb.CheckRegressed(ctx, db.Pool(), out)
		if outErr != nil && !errors.Is(outErr, tsdb.ErrIncompatible) {
			return outErr
		}
		return errors.Join(CheckSchema(t, a), checkGroupBy(t, a), outErr)
	}
}

func firstField(t tsdb.Table) string {
	for _, c := range t.Columns {
		if c.Kind == tsdb.KindField {
			return c.Name
		}
	}
	return ""
}

func columnList(t tsdb.Table) string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// checkGroupBy refuses group_by columns that are not tag columns of the
// table, as a run would.
func checkGroupBy(t tsdb.Table, a schemas.RunArgs) error {
	var errs []error
	tags := strings.Join(t.Tags(), ", ")
	if tags == "" {
		tags = "none"
	}
	for _, c := range a.GroupBy {
		if !slices.Contains(t.Tags(), c) {
			errs = append(errs, fmt.Errorf("group_by: %q is not a tag column of %q (tag columns: %s)", c, t.Name, tags))
		}
	}
	return errors.Join(errs...)
}
