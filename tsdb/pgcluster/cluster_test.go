package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartStopReuse(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ctx := context.Background()
	c, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	// Attaching to the running cluster does not own it.
	att, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := att.Port(), c.Port(); got != want {
		t.Fatalf("attached port=%d, want %d", got, want)
	}
	att.Stop()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	// A second start reuses the data.
	c2, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg"), Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Stop()
	conn, err = pgx.Connect(ctx, c2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 42 {
		t.Fatalf("v=%d err=%v, want 42", v, err)
	}
}
