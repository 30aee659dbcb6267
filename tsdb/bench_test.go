package tsdb

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// BenchmarkReadWindow reads a 4,000-row window of one series, as the
// producer does for every task.
func BenchmarkReadWindow(b *testing.B) {
	pool := pgtest.New(b)
	ctx := context.Background()
	const rows = 4000
	if _, err := pool.Exec(ctx, `CREATE TABLE m ("time" timestamptz NOT NULL, series text, y double precision, x1 double precision, x2 double precision, x3 double precision, x4 double precision);
		CREATE INDEX ON m (series, "time")`); err != nil {
		b.Fatal(err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"m"}, []string{"time", "series", "y", "x1", "x2", "x3", "x4"},
		pgx.CopyFromSlice(rows, func(i int) ([]any, error) {
			var y any = float64(i)
			if i%4 == 0 {
				y = nil
			}
			return []any{t0.Add(time.Duration(i) * time.Minute), "s1", y, math.Sin(float64(i)), 1.0, 2.0, 3.0}, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	db := New(pool)
	q := WindowQuery{Measurement: "m", Target: "y", Features: []string{"x1", "x2", "x3", "x4"}, TagColumns: []string{"series"},
		Filter: map[string]string{"series": "s1"}, Start: t0, End: t0.Add(rows * time.Minute), Limit: 50000}
	b.ReportAllocs()
	for b.Loop() {
		w, err := db.ReadWindow(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if n := w.Record.NumRows(); n != rows {
			b.Fatalf("rows=%d", n)
		}
		w.Release()
	}
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkWritePredictions is the writer's write of one batch, of new
// points (the COPY straight in) and of points already there (the COPY
// fails, then the upsert through the staging table).
func BenchmarkWritePredictions(b *testing.B) {
	pool := pgtest.New(b)
	ctx := context.Background()
	next := 0 // minutes: new points stay new across -count runs
	for _, n := range []int{250, 1000} {
		for _, again := range []bool{false, true} {
			name := fmt.Sprintf("new/rows=%d", n)
			if again {
				name = fmt.Sprintf("existing/rows=%d", n)
			}
			b.Run(name, func(b *testing.B) {
				s := Series{Measurement: fmt.Sprintf("w%d_%v", n, again), Target: "y", Model: "v/m", TagColumns: []string{"series"}, Tags: map[string]string{"series": "s1"}}
				if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return EnsureRegressed(ctx, tx, s) }); err != nil {
					b.Fatal(err)
				}
				pts := make([]Point, n)
				fresh := true
				b.ReportAllocs()
				for b.Loop() {
					if !again || fresh {
						fresh = false
						for j := range pts {
							pts[j] = Point{Time: t0.Add(time.Duration(next) * time.Minute), Value: float64(j)}
							next++
						}
					}
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						w, err := WritePredictions(ctx, tx, s, pts)
						if err == nil && w != int64(n) {
							err = fmt.Errorf("written=%d, want %d", w, n)
						}
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}
