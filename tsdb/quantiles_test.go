package tsdb

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// A regressed table made before quantiles gains their columns on the first
// write that has them (its older rows NULL there); writing a point again
// replaces its quantiles too, and a NaN quantile is NULL.
func TestQuantileColumnsAreAddedAndWritten(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	write := func(w Write) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := EnsureRegressed(ctx, tx, w.Series); err != nil {
				return err
			}
			_, err := WriteGroup(ctx, tx, []Write{w})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	old := Series{Measurement: "m", Target: "y", Model: "v/one", TagColumns: []string{"host"}, Tags: map[string]string{"host": "a"}}
	write(Write{Series: old, Points: []Point{{t0, 1}}})
	q := old
	q.Quantiles = []string{"p10", "p2_5"}
	h := t0.Add(time.Hour)
	write(Write{Series: q, Points: []Point{{h, 2}, {h.Add(time.Hour), 3}}, Quantiles: [][]float64{{1.5, 1}, {2.5, math.NaN()}}})
	// Again, through the upsert (the points exist): values replaced.
	write(Write{Series: q, Points: []Point{{h, 20}}, Quantiles: [][]float64{{15, 10}}})
	rows, err := pool.Query(ctx, `SELECT value, p10, p2_5 FROM m_regressed ORDER BY "time"`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		v         float64
		p10, p2_5 *float64
	}
	var got []row
	var r row
	if _, err := pgx.ForEachRow(rows, []any{&r.v, &r.p10, &r.p2_5}, func() error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].p10 != nil || got[0].p2_5 != nil ||
		got[1].v != 20 || got[1].p10 == nil || *got[1].p10 != 15 || *got[1].p2_5 != 10 ||
		got[2].p10 == nil || *got[2].p10 != 2.5 || got[2].p2_5 != nil {
		t.Fatalf("rows %+v", got)
	}
	// A point replaced by a write with fewer levels, or none, loses the
	// quantiles it no longer has: they were the replaced prediction's.
	only10 := old
	only10.Quantiles = []string{"p10"}
	write(Write{Series: only10, Points: []Point{{h, 30}}, Quantiles: [][]float64{{25}}})
	write(Write{Series: old, Points: []Point{{h.Add(time.Hour), 40}}})
	rows, err = pool.Query(ctx, `SELECT value, p10, p2_5 FROM m_regressed WHERE "time" > $1 ORDER BY "time"`, t0)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if _, err := pgx.ForEachRow(rows, []any{&r.v, &r.p10, &r.p2_5}, func() error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].v != 30 || got[0].p10 == nil || *got[0].p10 != 25 || got[0].p2_5 != nil ||
		got[1].v != 40 || got[1].p10 != nil || got[1].p2_5 != nil {
		t.Fatalf("replaced rows %+v: stale quantiles kept", got)
	}
}

// A quantile column that would also be a tag column, or that the table
// holds with another type, is refused by name.
func TestQuantileColumnClashesRefused(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	s := Series{Measurement: "c", Target: "y", Model: "v/one", TagColumns: []string{"p10"}, Quantiles: []string{"p10"}}
	if _, err := pool.Exec(ctx, `CREATE TABLE c_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL, model text NOT NULL, source text NOT NULL, target text NOT NULL, p90 text)`); err != nil {
		t.Fatal(err)
	}
	err := CheckRegressed(ctx, pool, s)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), `quantile column "p10" is also a tag column`) {
		t.Fatalf("tag clash: %v", err)
	}
	s.TagColumns, s.Quantiles = nil, []string{"p10", "p90"}
	err = CheckRegressed(ctx, pool, s)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), `quantile column "p90" is text, not double precision`) {
		t.Fatalf("typed clash: %v", err)
	}
}
