package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The audit found the private cluster's application role a superuser: a
// leaked password file meant COPY … TO PROGRAM. URL's role owns the
// regressd database (it creates tables and schemas there) and is no
// superuser; a database of an earlier regressd, owned by the superuser
// with its tables, is handed over on the next start.
func TestAppRoleIsNotSuperuser(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	pg := filepath.Join(dir, "pg")
	c, err := Start(ctx, Options{Dir: pg})
	if err != nil {
		t.Fatal(err)
	}
	check := func(c *Cluster) {
		t.Helper()
		if !strings.Contains(c.URL(), AppRole+"@") || !strings.Contains(c.URL(), appPassFile) {
			t.Fatalf("URL %q is not the application role's", c.URL())
		}
		conn, err := pgx.Connect(ctx, c.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var super, createDB, createRole bool
		if err := conn.QueryRow(ctx, `SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user`).Scan(&super, &createDB, &createRole); err != nil {
			t.Fatal(err)
		}
		if super || createDB || createRole {
			t.Fatalf("URL's role: superuser %v, createdb %v, createrole %v; want none", super, createDB, createRole)
		}
		if _, err := conn.Exec(ctx, `COPY (SELECT 1) TO PROGRAM 'true'`); err == nil {
			t.Fatal("COPY … TO PROGRAM ran as the application role")
		}
		for _, stmt := range []string{`CREATE SCHEMA IF NOT EXISTS out_s`, `CREATE TABLE IF NOT EXISTS out_s.t (x int)`, `CREATE TABLE IF NOT EXISTS t2 (x int)`, `SELECT count(*) FROM legacy`} {
			if _, err := conn.Exec(ctx, stmt); err != nil && !(strings.Contains(stmt, "legacy") && strings.Contains(err.Error(), "does not exist")) {
				t.Fatalf("%s as the application role: %v", stmt, err)
			}
		}
		if fi, err := os.Stat(filepath.Join(c.Dir(), appPassFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("application password file: %v %v, want mode 600", fi, err)
		}
	}
	check(c)

	// What an earlier regressd left: the database and a table owned by the
	// superuser, and no application role's password file.
	admin, err := pgx.Connect(ctx, c.AdminURL(Database))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`ALTER DATABASE regressd OWNER TO ` + Role, `CREATE TABLE legacy (x int)`, `INSERT INTO legacy VALUES (1)`} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	admin.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(c.Dir(), appPassFile))
	again, err := Start(ctx, Options{Dir: pg})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	check(again)
	conn, err := pgx.Connect(ctx, again.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO legacy VALUES (2)`); err != nil {
		t.Fatalf("the earlier regressd's table, as the application role: %v", err)
	}
}

// A password file is never written through a symlink planted where it goes.
func TestPasswordFileRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	link := filepath.Join(dir, "pass")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := writeSecret(link, "secret\n"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file %v %v, want a regular file of mode 600", fi, err)
	}
}
