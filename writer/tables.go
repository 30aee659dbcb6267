package writer

// The regressed tables a writer has made ready, once per process and tag
// set.

import (
	"context"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// outputSeries is where a task's predictions go.
func outputSeries(m schemas.TaskMeta) tsdb.Series {
	return tsdb.Series{Measurement: m.Measurement, Target: m.Target, Model: m.Model, Table: m.Output,
		Schema: m.OutputSchema, TagColumns: m.TagColumns, Tags: m.Series, Quantiles: schemas.QuantileColumns(m.Quantiles)}
}

// tableKey names a regressed table and the tag set it is ensured for.
func tableKey(s tsdb.Series) string {
	return s.Schema + "\x00" + s.Output() + "\x00" + strings.Join(s.TagColumns, "\x00") + "\x01" + strings.Join(s.Quantiles, "\x00")
}

func (w *Writer) markEnsured(keys ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.ensured[k] = true
	}
}

// ensure creates or adapts the regressed table once per process and tag set.
// It returns the key to mark as ensured once the transaction commits, or ""
// when the table was known to be ready.
func (w *Writer) ensure(ctx context.Context, tx pgx.Tx, s tsdb.Series) (string, error) {
	key := tableKey(s)
	w.mu.Lock()
	done := w.ensured[key]
	w.mu.Unlock()
	if done {
		return "", nil
	}
	// Serialise DDL on one table across writers.
	h := fnv.New64a()
	h.Write([]byte(s.OutputName()))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
		return "", err
	}
	if err := tsdb.EnsureRegressed(ctx, tx, s); err != nil {
		return "", err
	}
	return key, nil
}
