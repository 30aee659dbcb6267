package tsdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestDescribeAndReadWindow(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	// A name with a quote, a semicolon and unicode is quoted everywhere.
	const m = `we"ird; tablé`
	if _, err := pool.Exec(ctx, `CREATE TABLE `+pgx.Identifier{m}.Sanitize()+` ("time" timestamptz, "ho st" text, y numeric, x real, ok boolean)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{m}.Sanitize()+` VALUES
		($1, 'a', 1, 10, true), ($2, 'a', NULL, 'NaN', true), ($3, NULL, 'Infinity', 30, false), ($4, 'a', 4, 40, true)`,
		t0, t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	db := New(pool)
	tbl, err := db.Describe(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]Kind{"time": KindTime, "ho st": KindTag, "y": KindField, "x": KindField, "ok": KindOther}
	for name, want := range kinds {
		if c, _ := tbl.Column(name); c.Kind != want {
			t.Errorf("%s: kind %v, want %v", name, c.Kind, want)
		}
	}
	if _, err := db.Describe(ctx, "nope"); err == nil {
		t.Fatal("missing table described")
	}
	w, err := db.ReadWindow(ctx, WindowQuery{Measurement: m, Target: "y", Features: []string{"x"}, TagColumns: []string{"ho st"},
		Start: t0, End: t0.Add(4 * time.Hour), Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if !w.Truncated || w.Record.NumRows() != 3 {
		t.Fatalf("rows=%d truncated=%v, want the newest 3 and a cut flagged", w.Record.NumRows(), w.Truncated)
	}
	times := w.Record.Column(0).(*array.Timestamp)
	if times.Value(0) >= times.Value(2) {
		t.Fatal("window not in ascending time order")
	}
	y := w.Record.Column(2).(*array.Float64)
	x := w.Record.Column(3).(*array.Float64)
	tag := w.Record.Column(1).(*array.String)
	// Rows 1..3: y NULL, y Inf → empty; x NaN → empty; a NULL tag stays NULL.
	if !y.IsNull(0) || !x.IsNull(0) || !y.IsNull(1) || !tag.IsNull(1) || y.Value(2) != 4 {
		t.Fatalf("non-finite values or NULL tags read wrongly: y=%v x=%v tag=%v", y, x, tag)
	}
	f, err := db.ReadWindow(ctx, WindowQuery{Measurement: m, Target: "y", Features: []string{"x"}, TagColumns: []string{"ho st"},
		Filter: map[string]string{"ho st": "a"}, Start: t0, End: t0.Add(4 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if f.Record.NumRows() != 3 || f.Truncated {
		t.Fatalf("filtered rows=%d", f.Record.NumRows())
	}
}

func TestRegressedIdentity(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	db := New(pool)
	write := func(s Series, pts ...Point) int64 {
		t.Helper()
		var n int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := EnsureRegressed(ctx, tx, s); err != nil {
				return err
			}
			var err error
			n, err = WritePredictions(ctx, tx, s, pts)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := Series{Measurement: "m", Target: "y", Model: "v/one", TagColumns: []string{"host"}, Tags: map[string]string{"host": "a"}}
	null := Series{Measurement: "m", Target: "y", Model: "v/one", TagColumns: []string{"host"}}
	if n := write(a, Point{t0, 1}, Point{t0.Add(time.Hour), 2}); n != 2 {
		t.Fatalf("written=%d", n)
	}
	write(a, Point{t0, 10})   // replaces
	write(null, Point{t0, 5}) // another series (NULL host)
	write(null, Point{t0, 6}) // replaces within the NULL series
	b := a
	b.Model = "v/two"
	write(b, Point{t0, 7}) // another model: its own point
	var rows int
	var v float64
	pool.QueryRow(ctx, `SELECT count(*) FROM m_regressed`).Scan(&rows)
	pool.QueryRow(ctx, `SELECT value FROM m_regressed WHERE host = 'a' AND model = 'v/one' AND "time" = $1`, t0).Scan(&v)
	if rows != 4 || v != 10 {
		t.Fatalf("rows=%d value=%v, want 4 rows and the replaced value 10", rows, v)
	}
	existing, err := db.ExistingTimes(ctx, a, t0, t0.Add(2*time.Hour))
	if err != nil || len(existing) != 2 {
		t.Fatalf("existing=%v err=%v", existing, err)
	}
	// A new tag column on the source: the table and identity follow it.
	wide := Series{Measurement: "m", Target: "y", Model: "v/one", TagColumns: []string{"host", "zone"}, Tags: map[string]string{"host": "a", "zone": "z"}}
	write(wide, Point{t0, 11})
	pool.QueryRow(ctx, `SELECT count(*) FROM m_regressed`).Scan(&rows)
	if rows != 5 {
		t.Fatalf("rows=%d after a new tag, want 5", rows)
	}
	if none, err := db.ExistingTimes(ctx, Series{Measurement: "absent", Target: "y"}, t0, t0.Add(time.Hour)); err != nil || len(none) != 0 {
		t.Fatalf("missing output table: %v %v", none, err)
	}
}

// TestWriteGroup: series of one table share a COPY; written again, the
// group falls back to upserting each series and replaces its values.
func TestWriteGroup(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	a := Series{Measurement: "g", Target: "y", Model: "v/one", TagColumns: []string{"host"}, Tags: map[string]string{"host": "a"}}
	b := Series{Measurement: "g", Target: "y", Model: "v/one", TagColumns: []string{"host"}, Tags: map[string]string{"host": "b"}}
	other := Series{Measurement: "h", Target: "y", Model: "v/one"}
	write := func(v float64) []int64 {
		t.Helper()
		var n []int64
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, s := range []Series{a, other} {
				if err := EnsureRegressed(ctx, tx, s); err != nil {
					return err
				}
			}
			var err error
			n, err = WriteGroup(ctx, tx, []Write{
				{Series: a, Points: []Point{{t0, v}, {t0.Add(time.Hour), v}}},
				{Series: other, Points: []Point{{t0, v}}},
				{Series: b, Points: []Point{{t0, v}}},
				{Series: b},
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, v := range []float64{1, 2} { // the second write replaces the first
		if got := write(v); !slices.Equal(got, []int64{2, 1, 1, 0}) {
			t.Fatalf("write %v: written %v, want [2 1 1 0]", v, got)
		}
		var rows int
		var sum float64
		if err := pool.QueryRow(ctx, `SELECT count(*), sum(value) FROM g_regressed`).Scan(&rows, &sum); err != nil || rows != 3 || sum != 3*v {
			t.Fatalf("after write %v: %d rows summing to %v (%v), want 3 rows of %v", v, rows, sum, err, v)
		}
	}
	// skip_existing: a point another task wrote meanwhile is kept and not
	// counted; only the new one is written.
	var n []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		n, err = WriteGroup(ctx, tx, []Write{{Series: a, Points: []Point{{t0, 9}, {t0.Add(2 * time.Hour), 9}}, KeepExisting: true}})
		return err
	})
	var sum float64
	if err != nil || !slices.Equal(n, []int64{1}) {
		t.Fatalf("keep-existing write: written %v (%v), want [1]", n, err)
	}
	if err := pool.QueryRow(ctx, `SELECT sum(value) FROM g_regressed WHERE host = 'a'`).Scan(&sum); err != nil || sum != 2+2+9 {
		t.Fatalf("host a sums to %v (%v), want the two kept values 2 and the new 9", sum, err)
	}
}

// TestCheckRegressed: an output table made by someone else is refused with
// every problem named, before anything is written; one regressd can write
// (its own, or a compatible one with varchar labels and extra nullable
// columns) passes, and so does none at all.
func TestCheckRegressed(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	s := func(m string) Series {
		return Series{Measurement: m, Target: "y", Model: "v/one", TagColumns: []string{"host"}, Tags: map[string]string{"host": "a"}}
	}
	for _, ddl := range []string{
		`CREATE TABLE bad_regressed (x int)`,
		`CREATE TABLE typed_regressed ("time" timestamptz, value text, model text, source text, target int, host int)`,
		`CREATE TABLE extra_regressed ("time" timestamptz, value double precision, model text, source text, target text, note text NOT NULL)`,
		`CREATE TABLE fine_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL, model varchar(64), source text, target text, note text, id serial NOT NULL,
			seq bigint GENERATED ALWAYS AS IDENTITY, doubled double precision GENERATED ALWAYS AS (value * 2) STORED)`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	for m, want := range map[string][]string{
		"bad":    {`no column "time" (timestamptz)`, `no column "source" (text)`, `no column "value"`},
		"typed":  {`column "value" is text, not double precision`, `column "target" is integer, not text`, `tag column "host" is integer, not text`},
		"extra":  {`column "note" is NOT NULL with no default`},
		"fine":   nil,
		"absent": nil,
	} {
		err := CheckRegressed(ctx, pool, s(m))
		if want == nil {
			if err != nil {
				t.Errorf("%s: %v", m, err)
			}
			continue
		}
		if !errors.Is(err, ErrIncompatible) {
			t.Fatalf("%s: err = %v, want ErrIncompatible", m, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", m, err, w)
			}
		}
	}
	// EnsureRegressed refuses the same table instead of failing on its index.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return EnsureRegressed(ctx, tx, s("bad")) })
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("EnsureRegressed on an incompatible table: %v", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := EnsureRegressed(ctx, tx, s("fine")); err != nil {
			return err
		}
		_, err := WritePredictions(ctx, tx, s("fine"), []Point{{t0, 1}})
		return err
	})
	if err != nil {
		t.Fatalf("writing to a compatible table: %v", err)
	}
}

// TestSharedOutputTagColumns: two sources with different tag columns in one
// named output table. The second is refused (ErrIncompatible, naming both
// tag sets) instead of re-keying the table, and the first keeps writing.
func TestSharedOutputTagColumns(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	write := func(s Series, pts ...Point) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := EnsureRegressed(ctx, tx, s); err != nil {
				return err
			}
			_, err := WritePredictions(ctx, tx, s, pts)
			return err
		})
	}
	for _, first := range []string{"tagged", "plain"} {
		table := "shared_" + first
		a := Series{Measurement: "ws", Target: "y", Model: "v/one", Table: table, TagColumns: []string{"station"}, Tags: map[string]string{"station": "A"}}
		b := Series{Measurement: "Température", Target: "ΔT", Model: "v/one", Table: table}
		c := a
		c.Tags = map[string]string{"station": "B"}
		owner, other := a, b
		if first == "plain" {
			owner, other = b, a
		}
		if err := write(owner, Point{t0, 1}); err != nil {
			t.Fatalf("%s: first writer: %v", first, err)
		}
		err := write(other, Point{t0, 2})
		if !errors.Is(err, ErrIncompatible) {
			t.Fatalf("%s: a source with other tag columns: err = %v, want ErrIncompatible", first, err)
		}
		for _, w := range []string{"(station)", "(none)", "output_measurement"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not mention %q", first, err, w)
			}
		}
		if err := CheckRegressed(ctx, pool, other); !errors.Is(err, ErrIncompatible) {
			t.Errorf("%s: CheckRegressed: %v, want ErrIncompatible", first, err)
		}
		// The owner's identity is untouched: its next series still writes.
		next := c
		if first == "plain" {
			next = b
			next.Target = "other"
		}
		if err := write(next, Point{t0, 3}); err != nil {
			t.Fatalf("%s: the owner's tag set after the refusal: %v", first, err)
		}
		var n int
		pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q`, table)).Scan(&n)
		if n != 2 {
			t.Errorf("%s: rows=%d, want 2", first, n)
		}
	}
}

// TestFilterNoTagValue: an empty tag value in the filter is "no value",
// NULL and empty alike; a value matches itself only.
func TestFilterNoTagValue(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE nv ("time" timestamptz, site text, y double precision)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO nv VALUES ($1, NULL, 1), ($1 + interval '1 hour', '', 2), ($1 + interval '2 hours', 'x', 3), ($1 + interval '3 hours', NULL, 4)`, t0); err != nil {
		t.Fatal(err)
	}
	db := New(pool)
	for _, tc := range []struct {
		value string
		want  int64
	}{{"", 3}, {"x", 1}, {"nope", 0}} {
		w, err := db.ReadWindow(ctx, WindowQuery{Measurement: "nv", Target: "y", TagColumns: []string{"site"},
			Filter: map[string]string{"site": tc.value}, Start: t0, End: t0.Add(4 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Record.NumRows(); got != tc.want {
			t.Errorf("site=%q: %d rows, want %d", tc.value, got, tc.want)
		}
		w.Release()
	}
}

// A numeric value past double precision's range is empty, as ±Inf is; it
// used to fail the whole read with SQLSTATE 22003.
func TestReadWindowNumericPastDoubleRange(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE big ("time" timestamptz, y numeric, x numeric)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO big VALUES ($1, 1, 1e400), ($2, -1e400, 2), ($3, 3, 'NaN'), ($4, 4.5, -4.5)`,
		t0, t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	db := New(pool)
	tbl, err := db.Describe(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.ReadWindow(ctx, WindowQuery{Measurement: "big", Target: "y", Features: []string{"x"},
		Start: t0, End: t0.Add(4 * time.Hour), Decimal: tbl.Decimal()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	y := w.Record.Column(1).(*array.Float64)
	x := w.Record.Column(2).(*array.Float64)
	if w.Record.NumRows() != 4 || !x.IsNull(0) || !y.IsNull(1) || !x.IsNull(2) || y.Value(0) != 1 || y.Value(3) != 4.5 || x.Value(3) != -4.5 {
		t.Fatalf("y=%v x=%v, want values past the range and NaN empty, the rest kept", y, x)
	}
}
