// Package pgtest gives tests an isolated, migrated PostgreSQL database: a
// fresh database per test in the server named by REGRESSD_TEST_DATABASE_URL,
// or else in a private cluster that Main starts for the test binary.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgcluster"
)

// EnvURL names the variable that points tests at an existing server. The
// user in it must be allowed to create databases.
const EnvURL = "REGRESSD_TEST_DATABASE_URL"

// Server is the database server a test binary uses.
type Server struct {
	adminURL string
	cluster  *pgcluster.Cluster
}

// server is set once by Main before any test runs and read only afterwards.
var server *Server

// Main runs a test binary's tests with a database server available, and
// stops the private cluster afterwards. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	s, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	server = s
	defer s.Stop()
	return m.Run()
}

// Start connects to REGRESSD_TEST_DATABASE_URL or starts a private cluster in
// a temporary directory.
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{adminURL: u}, nil
	}
	dir, err := os.MkdirTemp("", "regressd-pgtest-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir + "/pg", Fast: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Server{adminURL: c.AdminURL("postgres"), cluster: c}, nil
}

// Stop stops the private cluster, if any, and removes its files.
func (s *Server) Stop() {
	if s.cluster != nil {
		s.cluster.Stop()
		os.RemoveAll(filepath.Dir(s.cluster.Dir()))
	}
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, func(), error) {
	b := make([]byte, 6)
	rand.Read(b)
	name := "regressd_test_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(s.adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, s.adminURL); err == nil {
			c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(ctx)
		}
	}
	return u.String(), drop, nil
}

// URL creates a migrated database for t and returns its URL; it is dropped
// when t ends. Requires Main in TestMain.
func URL(t testing.TB) string {
	t.Helper()
	if server == nil {
		t.Fatal("pgtest: call pgtest.Main from TestMain")
	}
	ctx := context.Background()
	u, drop, err := server.NewDatabase(ctx)
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(drop)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer pool.Close()
	if err := schemas.Migrate(ctx, pool); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return u
}

// New returns a pool on a fresh migrated database, closed when t ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
