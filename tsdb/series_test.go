package tsdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// seriesFixture makes a measurement with two stations, every third target
// empty, and an output table holding predictions for those gaps of one
// station (and one of the other, which a view of the first must not show).
func seriesFixture(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`CREATE TABLE m ("time" timestamptz NOT NULL, station text, sensor text, y double precision, x double precision)`)
	for i := 0; i < 30; i++ {
		var y any = float64(i)
		if i%3 == 2 {
			y = nil
		}
		exec(`INSERT INTO m VALUES ($1, 'a', 's1', $2, 1), ($1, 'b', 's1', $2, 1)`, t0.Add(time.Duration(i)*time.Hour), y)
	}
	exec(`CREATE TABLE m_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL, model text NOT NULL,
		source text NOT NULL, target text NOT NULL, station text, sensor text)`)
	for i := 2; i < 30; i += 3 {
		exec(`INSERT INTO m_regressed VALUES ($1, $2, 'v/model-1', 'm', 'y', 'a', 's1')`, t0.Add(time.Duration(i)*time.Hour), float64(i)+0.5)
	}
	exec(`INSERT INTO m_regressed VALUES ($1, 9, 'v/model-1', 'm', 'y', 'b', 's1')`, t0.Add(2*time.Hour))
	exec(`INSERT INTO m_regressed VALUES ($1, 9, 'v/model-1', 'm', 'other', 'a', 's1')`, t0.Add(2*time.Hour))
	exec(`INSERT INTO m_regressed VALUES ($1, 'NaN', 'v/model-1', 'm', 'y', 'a', 's1')`, t0.Add(29*time.Hour))
}

func TestReadSeries(t *testing.T) {
	pool := pgtest.New(t)
	seriesFixture(t, pool)
	db := New(pool)
	ctx := context.Background()
	q := SeriesQuery{Measurement: "m", Target: "y", Filter: map[string]string{"station": "a"}, Start: t0, End: t0.Add(30 * time.Hour)}
	v, err := db.ReadSeries(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(v.Observed), 30; got != want {
		t.Fatalf("observed=%d, want %d", got, want)
	}
	gaps := 0
	for _, p := range v.Observed {
		if p.Value == nil {
			gaps++
		}
	}
	if gaps != 10 {
		t.Fatalf("gaps=%d, want 10", gaps)
	}
	// 10 predictions of station a's y; b's, another target's and a NaN are not shown.
	if got, want := len(v.Filled), 10; got != want {
		t.Fatalf("filled=%d, want %d: %+v", got, want, v.Filled)
	}
	if v.Filled[0].Value != 2.5 || !v.Filled[0].Time.Equal(t0.Add(2*time.Hour)) || v.Intervals || v.Filled[0].P10 != nil {
		t.Fatalf("first filled point %+v intervals=%v", v.Filled[0], v.Intervals)
	}
	if v.Tags["station"] != "a" || v.Tags["sensor"] != "s1" {
		t.Fatalf("tags %v, want every tag of the series", v.Tags)
	}

	// Without a filter the window holds two series.
	q.Filter = nil
	if _, err := db.ReadSeries(ctx, q); !errors.Is(err, ErrManySeries) {
		t.Fatalf("two series read as one: %v", err)
	}

	// A limit keeps the newest rows and says so.
	q.Filter, q.Limit = map[string]string{"station": "a"}, 5
	v, err = db.ReadSeries(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Observed) != 5 || !v.ObservedTruncated || !v.Observed[4].Time.Equal(t0.Add(29*time.Hour)) {
		t.Fatalf("limited observed=%d truncated=%v", len(v.Observed), v.ObservedTruncated)
	}
	if len(v.Filled) != 5 || !v.FilledTruncated || !v.Filled[4].Time.Equal(t0.Add(29*time.Hour)) {
		t.Fatalf("limited filled=%d truncated=%v last=%v", len(v.Filled), v.FilledTruncated, v.Filled[len(v.Filled)-1].Time)
	}

	// p10/p90 columns are found and read; non-finite bounds read as none.
	if _, err := pool.Exec(ctx, `ALTER TABLE m_regressed ADD COLUMN p10 real, ADD COLUMN p90 double precision`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE m_regressed SET p10 = value - 1, p90 = CASE WHEN "time" = $1 THEN 'Infinity' ELSE value + 1 END`, t0.Add(5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	q.Limit = 0
	v, err = db.ReadSeries(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Intervals || v.Filled[0].P10 == nil || *v.Filled[0].P10 != 1.5 || *v.Filled[0].P90 != 3.5 {
		t.Fatalf("intervals=%v first=%+v", v.Intervals, v.Filled[0])
	}
	if v.Filled[1].P90 != nil || v.Filled[1].P10 == nil {
		t.Fatalf("an infinite bound read as %v", *v.Filled[1].P90)
	}
}

func TestReadSeriesEdges(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	db := New(pool)
	if _, err := db.ReadSeries(ctx, SeriesQuery{Measurement: "nope", Target: "y", Start: t0, End: t0.Add(time.Hour)}); !errors.Is(err, ErrNoTable) {
		t.Fatalf("missing table: %v", err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{`q"t`}.Sanitize()+` ("time" timestamptz, y numeric, label text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{`q"t`}.Sanitize()+` VALUES ($1, 'NaN', 'x'), ($2, 2, 'x')`, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []SeriesQuery{
		{Measurement: `q"t`, Target: "label"},
		{Measurement: `q"t`, Target: "y", Filter: map[string]string{"nope": "1"}},
	} {
		q.Start, q.End = t0, t0.Add(2*time.Hour)
		if _, err := db.ReadSeries(ctx, q); !errors.Is(err, ErrNoColumn) {
			t.Fatalf("%+v: %v, want ErrNoColumn", q, err)
		}
	}
	// No output table yet: the series, and nothing filled.
	v, err := db.ReadSeries(ctx, SeriesQuery{Measurement: `q"t`, Target: "y", Start: t0, End: t0.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Observed) != 2 || v.Observed[0].Value != nil || *v.Observed[1].Value != 2 || len(v.Filled) != 0 {
		t.Fatalf("observed %+v filled %+v", v.Observed, v.Filled)
	}
	if v.Tags["label"] != "x" {
		t.Fatalf("tags %v", v.Tags)
	}
}
