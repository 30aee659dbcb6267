package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// The binary fast path and the scanning fallback (text results, as the
// simple protocol returns them) read the same window.
func TestReadWindowBinaryAndScannedAgree(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	fast, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	slow, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := fast.Exec(ctx, `CREATE TABLE m ("time" timestamptz, a text, b text, y double precision, x real);
		INSERT INTO m VALUES
			('2026-01-01T00:00:00Z', 'é', NULL, 1, 2), ('2026-01-01T00:01:00Z', NULL, '', NULL, 'NaN'),
			('2026-01-01T00:02:00Z', 'long tag value', 'b', 'Infinity', 3), (NULL, 'x', 'x', 1, 1),
			('2026-01-01T00:03:00Z', '', 'c', -0.5, '-Infinity')`); err != nil {
		t.Fatal(err)
	}
	q := WindowQuery{Measurement: "m", Target: "y", Features: []string{"x"}, TagColumns: []string{"a", "b"},
		Start: t0, End: t0.Add(time.Hour)}
	read := func(pool *pgxpool.Pool) *Window {
		t.Helper()
		w, err := New(pool).ReadWindow(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Release)
		return w
	}
	a, b := read(fast), read(slow)
	if a.Record.NumRows() != 4 || !array.RecordEqual(a.Record, b.Record) {
		t.Fatalf("binary read %v\nscanned read %v", a.Record, b.Record)
	}
	tag := a.Record.Column(1).(*array.String)
	if tag.Value(0) != "é" || !tag.IsNull(1) || tag.Value(2) != "long tag value" || tag.IsNull(3) || tag.Value(3) != "" {
		t.Fatalf("tags read wrongly: %v", tag)
	}
}
