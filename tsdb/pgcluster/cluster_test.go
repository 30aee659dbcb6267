package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// A cluster regressd runs requires the generated password; its URL carries
// no secret but names the 0600 password file, and a trusting cluster of an
// earlier version is closed on its next start.
func TestPasswordRequired(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		createdFast bool
	}{
		{"created", false},
		{"trusting cluster restarted", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			pg := filepath.Join(dir, "pg")
			if tc.createdFast {
				old, err := Start(ctx, Options{Dir: pg, Fast: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := old.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Start(ctx, Options{Dir: pg})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			u := c.URL()
			if !strings.Contains(u, "passfile=") {
				t.Fatalf("URL %q names no password file", u)
			}
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatalf("connect with the URL: %v", err)
			}
			conn.Close(ctx)
			fi, err := os.Stat(filepath.Join(c.Dir(), passFile))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("password file mode %o, want 600", got)
			}
			bare := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", Role, c.Port(), Database)
			if conn, err := pgx.Connect(ctx, bare); err == nil {
				conn.Close(ctx)
				t.Fatalf("connected without the password")
			}
			att, err := Attach(ctx, Options{Dir: pg})
			if err != nil {
				t.Fatalf("attach: %v", err)
			}
			if got, want := att.URL(), u; got != want {
				t.Errorf("attached URL %q, want %q", got, want)
			}
		})
	}
}

func TestAttachStartsNothing(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	if _, err := Attach(context.Background(), Options{Dir: filepath.Join(dir, "pg")}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("err=%v, want ErrNotRunning", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pg", "PG_VERSION")); err == nil {
		t.Fatal("Attach created a cluster")
	}
}

// A start cut off between initdb and writing the passfile leaves the
// password beside the data dir; the next start finds it and the cluster
// is reachable, not locked with a password nobody kept.
func TestPasswordSurvivesACutInitdb(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	c, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// What a crash right after initdb leaves: the pending password, no passfile.
	line, err := os.ReadFile(filepath.Join(c.Dir(), passFile))
	if err != nil {
		t.Fatal(err)
	}
	password := strings.TrimSpace(string(line[strings.LastIndexByte(string(line), ':')+1:]))
	if err := os.WriteFile(c.pendingPassword(), []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(c.Dir(), passFile)); err != nil {
		t.Fatal(err)
	}
	again, err := Start(ctx, Options{Dir: filepath.Join(dir, "pg")})
	if err != nil {
		t.Fatalf("start after the cut: %v", err)
	}
	defer again.Stop()
	conn, err := pgx.Connect(ctx, again.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	conn.Close(ctx)
	if _, err := os.Stat(again.pendingPassword()); !os.IsNotExist(err) {
		t.Fatalf("the pending password is still there: %v", err)
	}
}
