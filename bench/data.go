package bench

import (
	"context"
	"fmt"
	"golang.org/x/sync/errgroup"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/progress"
	"github.com/regressd/regressd/tsdb"
)

// benchBase is when every generated series starts; rows are a minute apart.
var benchBase = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	benchTargetCol = "y"
	benchTag       = "series"
	benchInterval  = time.Minute
)

// benchTask is one run: one series of one measurement over its whole window.
type benchTask struct {
	table    string
	series   string
	start    time.Time
	end      time.Time
	rows     int // rows in the window
	gaps     int // rows with an empty target: what a run predicts
	examples int // rows with the target
}

func benchTable(i int) string { return fmt.Sprintf("regressd_bench_m%d", i) }

func benchFeatures(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("x%d", i+1)
	}
	return out
}

// sinkSeries is where a baseline writes a table's predictions: a table of the
// same shape as <measurement>_regressed (same columns, same identity index)
// but its own, so the baselines and the pipeline never upsert each other's rows.
func sinkSeries(table, kind, model string, series string) tsdb.Series {
	return tsdb.Series{Measurement: table + "_" + kind, Target: benchTargetCol, Model: model,
		TagColumns: []string{benchTag}, Tags: map[string]string{benchTag: series}}
}

// dropBench removes every table a bench run creates.
func dropBench(ctx context.Context, pool *pgxpool.Pool, tables []string) error {
	var names []string
	for _, t := range tables {
		for _, suffix := range []string{"", "_regressed", "_copy_regressed", "_direct_regressed"} {
			names = append(names, pgx.Identifier{t + suffix}.Sanitize())
		}
	}
	if _, err := pool.Exec(ctx, "DROP TABLE IF EXISTS "+strings.Join(names, ", ")); err != nil {
		return fmt.Errorf("drop bench tables: %w", err)
	}
	return nil
}

// genSpec says what to generate in one table.
type genSpec struct {
	table    string
	series   int
	rows     int
	features int
	// gap says whether row r of series s has an empty target.
	gap func(rng *rand.Rand, s, r int) bool
}

// generate (re)creates a measurement table and fills it: smooth features with
// noise, a target that is a linear mix of them, and gaps where spec.gap says.
// It returns one task per series.
func generate(ctx context.Context, pool *pgxpool.Pool, spec genSpec) ([]benchTask, error) {
	feats := benchFeatures(spec.features)
	if err := dropBench(ctx, pool, []string{spec.table}); err != nil {
		return nil, err
	}
	tbl := pgx.Identifier{spec.table}.Sanitize()
	ddl := fmt.Sprintf(`CREATE TABLE %s ("time" timestamptz NOT NULL, %s text NOT NULL, %s double precision`, tbl, benchTag, benchTargetCol)
	for _, f := range feats {
		ddl += ", " + f + " double precision"
	}
	ddl += fmt.Sprintf(`); CREATE INDEX ON %s (%s, "time")`, tbl, benchTag)
	if _, err := pool.Exec(ctx, ddl); err != nil {
		return nil, fmt.Errorf("create %s: %w", spec.table, err)
	}
	tasks := make([]benchTask, spec.series)
	weights := make([]float64, spec.features)
	for j := range weights {
		weights[j] = 1 + float64(j%3) - 0.5*float64(j%2)
	}
	row := make([]any, 3+spec.features)
	xs := make([]float64, spec.features)
	cols := append([]string{"time", benchTag, benchTargetCol}, feats...)
	for s := range spec.series {
		name := fmt.Sprintf("s%04d", s)
		h := fnv.New64a()
		h.Write([]byte(spec.table))
		rng := rand.New(rand.NewPCG(h.Sum64(), uint64(s)))
		t := &tasks[s]
		*t = benchTask{table: spec.table, series: name, start: benchBase,
			end: benchBase.Add(time.Duration(spec.rows) * benchInterval), rows: spec.rows}
		r := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if r == spec.rows {
				return nil, nil
			}
			y := 0.05 * rng.NormFloat64()
			for j := range xs {
				xs[j] = math.Sin(float64(r)/float64(17+5*j)+float64(s)) + 0.1*rng.NormFloat64()
				y += weights[j] * xs[j]
				row[3+j] = xs[j]
			}
			row[0], row[1], row[2] = benchBase.Add(time.Duration(r)*benchInterval), name, y
			if spec.gap(rng, s, r) {
				row[2] = nil
				t.gaps++
			} else {
				t.examples++
			}
			r++
			return row, nil
		})
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{spec.table}, cols, src); err != nil {
			return nil, fmt.Errorf("fill %s: %w", spec.table, err)
		}
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+tbl); err != nil {
		return nil, fmt.Errorf("analyze %s: %w", spec.table, err)
	}
	return tasks, nil
}

// truncateOutputs empties the tables phases 1 and 3 write, between rounds.
func truncateOutputs(ctx context.Context, pool *pgxpool.Pool, tables []string) error {
	for _, t := range tables {
		for _, out := range []string{tsdb.RegressedName(t + "_copy"), tsdb.RegressedName(t)} {
			var exists bool
			if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{out}.Sanitize()).Scan(&exists); err != nil {
				return fmt.Errorf("empty %s: %w", out, err)
			}
			if !exists {
				continue
			}
			if _, err := pool.Exec(ctx, "TRUNCATE "+pgx.Identifier{out}.Sanitize()); err != nil {
				return fmt.Errorf("empty %s: %w", out, err)
			}
		}
	}
	return nil
}

// ensureSinks creates the baselines' output tables outside any timing.
func ensureSinks(ctx context.Context, pool *pgxpool.Pool, tables []string, kind string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, t := range tables {
			if err := tsdb.EnsureRegressed(ctx, tx, sinkSeries(t, kind, "", "")); err != nil {
				return err
			}
		}
		return nil
	})
}

// rawCopy COPYs as many rows as each task predicts straight into a table of
// the regressed shape, one COPY per task, the tasks dealt round-robin over
// conns connections: the write limit of one connection, or of several.
func rawCopy(ctx context.Context, pool *pgxpool.Pool, tasks []benchTask, model string, conns int, bar *progress.Bar) (phaseResult, error) {
	var pr phaseResult
	conns = max(1, min(conns, len(tasks)))
	lats := make([][]time.Duration, conns)
	rows := make([]int64, conns)
	began := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	for c := range conns {
		g.Go(func() error {
			for i := c; i < len(tasks); i += conns {
				t0 := time.Now()
				n, err := copyTask(gctx, pool, tasks[i], model)
				if err != nil {
					return fmt.Errorf("raw copy: %w", err)
				}
				rows[c] += n
				lats[c] = append(lats[c], time.Since(t0))
				bar.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return pr, err
	}
	var lat []time.Duration
	for c := range conns {
		pr.Rows += rows[c]
		lat = append(lat, lats[c]...)
	}
	pr.finish(len(tasks), time.Since(began), lat)
	return pr, nil
}

// copyTask COPYs one task's gaps' worth of rows on one connection.
func copyTask(ctx context.Context, pool *pgxpool.Pool, t benchTask, model string) (int64, error) {
	s := sinkSeries(t.table, "copy", model, t.series)
	row := []any{nil, 0.0, model, t.table, benchTargetCol, t.series}
	i := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if i == t.gaps {
			return nil, nil
		}
		row[0], row[1] = t.start.Add(time.Duration(i)*benchInterval), float64(i)
		i++
		return row, nil
	})
	return pool.CopyFrom(ctx, pgx.Identifier{tsdb.RegressedName(s.Measurement)},
		[]string{"time", "value", "model", "source", "target", benchTag}, src)
}

// windowSelect reads a task's window the way the producer does: newest first,
// the tag, the target and the features.
func windowSelect(t benchTask, features []string) (string, []any) {
	sql := fmt.Sprintf(`SELECT "time", %s, %s, %s FROM %s WHERE "time" >= $1 AND "time" < $2 AND %s = $3 ORDER BY "time" DESC`,
		benchTag, benchTargetCol, strings.Join(features, ", "), pgx.Identifier{t.table}.Sanitize(), benchTag)
	return sql, []any{t.start, t.end, t.series}
}

// rawRead reads every task's window without decoding a value: the read limit.
func rawRead(ctx context.Context, pool *pgxpool.Pool, tasks []benchTask, features []string, bar *progress.Bar) (phaseResult, error) {
	var pr phaseResult
	lat := make([]time.Duration, 0, len(tasks))
	began := time.Now()
	for _, t := range tasks {
		t0 := time.Now()
		sql, args := windowSelect(t, features)
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			return pr, fmt.Errorf("raw read: %w", err)
		}
		for rows.Next() {
			_ = rows.RawValues()
			pr.Rows++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return pr, fmt.Errorf("raw read: %w", err)
		}
		lat = append(lat, time.Since(t0))
		bar.Add(1)
	}
	pr.finish(len(tasks), time.Since(began), lat)
	return pr, nil
}
