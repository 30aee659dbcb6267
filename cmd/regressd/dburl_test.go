package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/tsdb/pgcluster"
)

// database-url prints the running private cluster's URL, which connects,
// and starts nothing when none runs.
func TestDatabaseURLOfRunningCluster(t *testing.T) {
	dataDir := t.TempDir()
	os.Chmod(dataDir, 0o755)
	ctx := context.Background()
	cl, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(dataDir, "postgres")})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "database-url", "--data-dir", dataDir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got, want := strings.TrimSpace(out), cl.URL(); got != want {
		t.Fatalf("url %q, want %q", got, want)
	}
	conn, err := pgx.Connect(ctx, strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	conn.Close(ctx)
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, "database-url", "--data-dir", dataDir)
	if code != 1 || !strings.Contains(errOut, "no regressd is running") {
		t.Fatalf("stopped cluster: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI(t, "database-url", "--database-url", "postgres://x@db/y"); code != 0 || strings.TrimSpace(out) != "postgres://x@db/y" {
		t.Fatalf("--database-url: exit %d, %q", code, out)
	}
}
