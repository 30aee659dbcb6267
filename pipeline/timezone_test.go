package pipeline_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// A source whose time column is timestamp without time zone holds wall
// clock times of the database's TimeZone: its predictions land on the
// same instants (they joined no source row when the session forced UTC).
func TestTimestampWithoutZoneUsesTheDatabaseZone(t *testing.T) {
	e := pipelinetest.Start(t)
	ctx := context.Background()
	u, err := url.Parse(e.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if _, err := e.Pool.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" SET timezone = 'America/New_York'"); err != nil {
		t.Fatal(err)
	}
	// The setting reaches new sessions: start the pipeline again on it.
	e.Stop()
	e = pipelinetest.StartWith(t, nil, "--database-url", e.DBURL)
	if _, err := e.Pool.Exec(ctx, `CREATE TABLE live ("time" timestamp NOT NULL, x1 double precision, x2 double precision, y double precision)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO live SELECT '2026-06-01 00:00'::timestamp + i * interval '1 hour', sin(i / 7.0), cos(i / 11.0),
		CASE WHEN i % 5 = 0 THEN NULL ELSE 2 * sin(i / 7.0) - cos(i / 11.0) END FROM generate_series(0, 99) i`); err != nil {
		t.Fatal(err)
	}
	e.CreateTrigger("live", "request:live", pipelinetest.Args("live", ""))
	// 2026-06-01 00:00 in New York is 04:00Z: a window from 04:00Z holds
	// every row.
	from := time.Date(2026, 6, 1, 4, 0, 0, 0, time.UTC)
	st, out := e.Engine("live", pipelinetest.Window(from, from.Add(100*time.Hour)))
	if r := pipelinetest.Result(t, out); st != http.StatusOK || pipelinetest.Num(r["written"]) != 20 {
		t.Fatalf("HTTP %d %v, want 20 written", st, out)
	}
	if got := e.Count(`SELECT count(*) FROM live_regressed r JOIN live l ON l."time" = r."time" WHERE l.y IS NULL`); got != 20 {
		t.Fatalf("%d predictions on the times of the rows they fill, want 20", got)
	}
}
