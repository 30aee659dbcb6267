// Package pgcluster runs a private PostgreSQL cluster from the system's
// PostgreSQL binaries: created under a directory, on a free loopback port,
// stopped by its owner. It is regressd's embedded database default and the
// test harness's database.
//
// Every connection authenticates with a password generated at creation and
// kept, mode 0600, in the cluster's directory as a libpq password file that
// URL names (passfile=), so only who can read the directory can connect; a
// Fast (test) cluster trusts local connections instead.
//
// URL connects as AppRole, which owns the regressd database and nothing
// more: not a superuser, so a leaked password file cannot run programs or
// read files on the server (COPY … TO PROGRAM). Role, the superuser, only
// creates AppRole and the database, with its own password file.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotRunning means Attach found no server running in the directory.
var ErrNotRunning = errors.New("private postgres is not running")

// passFile is the superuser's (Role's) libpq password file in the cluster's
// directory; appPassFile is AppRole's, which URL names.
const (
	passFile    = "regressd.pgpass"
	appPassFile = "regressd_app.pgpass"
)

// ErrNoBinaries means no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found: install the distribution's package (Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server) or pass --database-url")

// Database and roles created in every private cluster: Role is the
// superuser (initdb's bootstrap role), AppRole the role URL connects as.
const (
	Database = "regressd"
	Role     = "regressd"
	AppRole  = "regressd_app"
)

// Options configure Start.
type Options struct {
	// Dir holds the cluster. Created when missing; reused when it holds one.
	Dir string
	// Fast turns off fsync and full-page writes, and a cluster created Fast
	// trusts every local connection: for tests only.
	Fast   bool
	Logger *slog.Logger
}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir   string
	bin   string
	port  int
	owned bool
	// passfile and appPassfile are the password files' paths (Role's and
	// AppRole's); empty for a trusting cluster.
	passfile, appPassfile string
	cred                  *syscall.Credential
	logger                *slog.Logger
}

// FindBinDir locates initdb and pg_ctl: `pg_config --bindir`, then the newest
// /usr/lib/postgresql/*/bin, then PATH.
func FindBinDir() (string, error) {
	var cands []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		cands = append(cands, strings.TrimSpace(string(out)))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(debian, func(i, j int) bool { return pgMajor(debian[i]) > pgMajor(debian[j]) })
	cands = append(cands, debian...)
	cands = append(cands, "/usr/pgsql/bin", "/usr/local/pgsql/bin")
	if p, err := exec.LookPath("initdb"); err == nil {
		cands = append(cands, filepath.Dir(p))
	}
	for _, d := range cands {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start creates the cluster if needed and starts it, or attaches to the one
// already running in Dir (then Stop leaves it running).
func Start(ctx context.Context, o Options) (*Cluster, error) {
	c, err := open(o)
	if err != nil {
		return nil, err
	}
	if err := c.attach(ctx); err == nil {
		return c, nil
	}
	if _, err := os.Stat(filepath.Join(c.dir, "PG_VERSION")); err != nil {
		if err := c.initdb(ctx, o.Fast); err != nil {
			return nil, err
		}
	} else if c.passfile == "" {
		if err := c.recoverPassword(); err != nil {
			return nil, err
		}
	}
	if err := c.start(ctx, o.Fast); err != nil {
		return nil, err
	}
	c.owned = true
	if err := c.ensureDatabase(ctx, o.Fast); err != nil {
		c.Stop()
		return nil, err
	}
	if c.passfile == "" && !o.Fast {
		// Created by a regressd that trusted local connections: close that now.
		if err := c.requirePassword(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// Attach connects to the server already running in Dir and never starts
// one: ErrNotRunning when there is none. Stop leaves it running.
func Attach(ctx context.Context, o Options) (*Cluster, error) {
	c, err := open(o)
	if err != nil {
		return nil, err
	}
	if err := c.attach(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// open resolves where the cluster lives and who runs it.
func open(o Options) (*Cluster, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, logger: o.Logger}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as an unprivileged user.
		if err := c.dropPrivileges(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return nil, fmt.Errorf("private postgres: %w", err)
	}
	if c.cred != nil {
		if err := c.ensureReachable(); err != nil {
			return nil, err
		}
	}
	if p := filepath.Join(c.dir, passFile); fileExists(p) {
		c.passfile = p
	}
	if p := filepath.Join(c.dir, appPassFile); fileExists(p) {
		c.appPassfile = p
	}
	return c, nil
}

// attach uses the server running in the directory, if one answers.
func (c *Cluster) attach(ctx context.Context) error {
	port, ok := c.runningPort()
	if !ok {
		return ErrNotRunning
	}
	c.port = port
	if err := c.waitReady(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	c.logger.Info("attached to running private postgres", "dir", c.dir, "port", port)
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// URL is the connection string of the cluster's regressd database.
func (c *Cluster) URL() string { return c.DatabaseURL(Database) }

// DatabaseURL is the connection string of one database in the cluster, as
// AppRole. It holds no secret: the password is read from the file
// passfile= names, by pgx and psql alike. A cluster of an earlier regressd
// that has no AppRole yet (attached to, never started by this one) is
// reached as Role.
func (c *Cluster) DatabaseURL(db string) string {
	if c.appPassfile == "" && c.passfile != "" {
		return c.AdminURL(db)
	}
	return c.roleURL(AppRole, c.appPassfile, db)
}

// AdminURL is DatabaseURL as the superuser Role: for creating databases
// and roles (the test harness), never for regressd's own work.
func (c *Cluster) AdminURL(db string) string { return c.roleURL(Role, c.passfile, db) }

func (c *Cluster) roleURL(role, passfile, db string) string {
	u := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", role, c.port, db)
	if passfile != "" {
		u += "&passfile=" + url.QueryEscape(passfile)
	}
	return u
}

// Stop stops the server if this Cluster started it.
func (c *Cluster) Stop() error {
	if !c.owned {
		return nil
	}
	c.owned = false
	out, err := c.command(context.Background(), "pg_ctl", "-D", c.dir, "-m", "fast", "-w", "-t", "60", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("stop private postgres: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func (c *Cluster) dropPrivileges() error {
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if u == nil {
		return fmt.Errorf("private postgres: running as root and no 'postgres' or 'nobody' user to run the server as; create one or pass --database-url")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return nil
}

// ensureReachable makes Dir usable by the unprivileged server user. When the
// data dir sits where that user cannot go (under /root, say), the cluster
// lives under /var/lib/regressd in a folder named after Dir's path, so the
// next start with the same data dir finds it again.
func (c *Cluster) ensureReachable() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	if err := c.chown(c.dir); err != nil {
		return err
	}
	if c.command(context.Background(), "test", "-w", c.dir).Run() == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(c.dir))
	alt := filepath.Join("/var/lib/regressd", hex.EncodeToString(sum[:8]), "postgres")
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(alt)), 0o755); err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	os.Chmod(filepath.Dir(filepath.Dir(alt)), 0o755)
	if err := os.MkdirAll(alt, 0o700); err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	for _, p := range []string{alt, filepath.Dir(alt)} {
		if err := c.chown(p); err != nil {
			return err
		}
	}
	c.logger.Info("private postgres kept outside the data dir: the server user cannot reach it", "data_dir", c.dir, "cluster_dir", alt)
	c.dir = alt
	return nil
}

func (c *Cluster) chown(p string) error {
	if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	return nil
}

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := name
	if p := filepath.Join(c.bin, name); isExec(p) {
		path = p
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	cmd.Dir = "/"
	return cmd
}

func (c *Cluster) initdb(ctx context.Context, trust bool) error {
	args := []string{"-D", c.dir, "-U", Role, "-E", "UTF8", "--no-locale", "--no-sync"}
	var password string
	if trust {
		args = append(args, "--auth=trust")
	} else {
		password = newPassword()
		// initdb reads the password from a file the server user can read.
		// The data dir must be empty, so the file waits beside it, where
		// the server user can reach it, until the passfile is written:
		// a start after a crash in between finds it there (recoverPassword).
		pending := c.pendingPassword()
		if err := c.writePending(pending, password); err != nil {
			os.Remove(pending)
			return fmt.Errorf("private postgres: password file: %w", err)
		}
		args = append(args, "--auth=scram-sha-256", "--pwfile="+pending)
	}
	out, err := c.command(ctx, "initdb", args...).CombinedOutput()
	if err != nil {
		os.Remove(c.pendingPassword())
		return fmt.Errorf("private postgres: initdb in %s: %v: %s", c.dir, err, lastLines(out, 3))
	}
	if password == "" {
		return nil
	}
	if err := c.writePassfile(password); err != nil {
		return err
	}
	return os.Remove(c.pendingPassword())
}

// writePending creates the pending password file afresh, never through a
// link the server user (who owns the folder when the cluster lives under
// /var/lib/regressd) may have planted, and gives it to that user.
func (c *Cluster) writePending(name, password string) error {
	os.Remove(name)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(password + "\n")
	if err == nil && c.cred != nil {
		err = f.Chown(int(c.cred.Uid), int(c.cred.Gid))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// pendingPassword is where a new cluster's password waits while initdb runs.
func (c *Cluster) pendingPassword() string {
	return filepath.Join(filepath.Dir(c.dir), "."+filepath.Base(c.dir)+".initdb-password")
}

// recoverPassword finishes an initdb that was cut off before its password
// reached the passfile.
func (c *Cluster) recoverPassword() error {
	b, err := os.ReadFile(c.pendingPassword())
	if err != nil {
		return nil // none pending
	}
	if err := c.writePassfile(strings.TrimSpace(string(b))); err != nil {
		return err
	}
	return os.Remove(c.pendingPassword())
}

func newPassword() string {
	b := make([]byte, 24)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// writePassfile keeps the password where DatabaseURL's passfile= points,
// readable by this process's user only (libpq ignores a laxer file).
func (c *Cluster) writePassfile(password string) error {
	p := filepath.Join(c.dir, passFile)
	if err := writeSecret(p, "*:*:*:"+Role+":"+password+"\n"); err != nil {
		return fmt.Errorf("private postgres: write %s: %w", p, err)
	}
	c.passfile = p
	return nil
}

// writeSecret writes a password file afresh, readable by this user only:
// never through a symlink (O_NOFOLLOW) and never into a file that someone
// else created first (O_EXCL after removing the old one), so a link
// planted where it goes redirects nothing, run as root or not.
func writeSecret(p, content string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// hbaPassword is the pg_hba.conf of a cluster that requires the password.
const hbaPassword = `# Written by regressd: every connection authenticates with the password in
# ` + passFile + ` (scram-sha-256); no local user is trusted.
local   all             all                     scram-sha-256
host    all             all     127.0.0.1/32    scram-sha-256
host    all             all     ::1/128         scram-sha-256
local   replication     all                     scram-sha-256
host    replication     all     127.0.0.1/32    scram-sha-256
host    replication     all     ::1/128         scram-sha-256
`

// requirePassword turns a trusting cluster, as earlier regressd versions
// created, into one that requires a generated password.
func (c *Cluster) requirePassword(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.AdminURL("postgres"))
	if err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	defer conn.Close(ctx)
	password := newPassword()
	// Hash it as pg_hba.conf will ask (md5 is the default before PostgreSQL
	// 14), and keep the statement, which holds the password, out of the log.
	for _, set := range []string{"SET password_encryption = 'scram-sha-256'", "SET log_statement = 'none'"} {
		if _, err := conn.Exec(ctx, set); err != nil {
			return fmt.Errorf("private postgres: %s: %w", set, err)
		}
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{Role}.Sanitize()+" PASSWORD '"+password+"'"); err != nil {
		return fmt.Errorf("private postgres: set password: %w", err)
	}
	if err := c.writePassfile(password); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "pg_hba.conf"), []byte(hbaPassword), 0o600); err != nil {
		return fmt.Errorf("private postgres: write pg_hba.conf: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("private postgres: reload: %w", err)
	}
	c.logger.Info("private postgres now requires a password", "passfile", c.passfile)
	return nil
}

func (c *Cluster) start(ctx context.Context, fast bool) error {
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	c.port = port
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200 -c timezone=UTC", port)
	if fast {
		opts += " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
	}
	logFile := filepath.Join(c.dir, "server.log")
	out, err := c.command(ctx, "pg_ctl", "-D", c.dir, "-l", logFile, "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
	if err != nil {
		tail, _ := os.ReadFile(logFile)
		return fmt.Errorf("private postgres: start: %v: %s %s", err, lastLines(out, 2), lastLines(tail, 3))
	}
	return c.waitReady(ctx)
}

// runningPort reads the port of a server already running on Dir.
func (c *Cluster) runningPort() (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, _ := strconv.Atoi(strings.TrimSpace(lines[3]))
	if pid <= 0 || port <= 0 || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return port, true
}

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.AdminURL("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("private postgres on port %d not ready: %w", c.port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ensureDatabase creates AppRole (with its password unless fast) and the
// database it owns; a database of an earlier regressd, owned by Role, is
// handed to AppRole with its tables, views and schemas.
func (c *Cluster) ensureDatabase(ctx context.Context, fast bool) error {
	conn, err := pgx.Connect(ctx, c.AdminURL("postgres"))
	if err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	defer conn.Close(ctx)
	app := pgx.Identifier{AppRole}.Sanitize()
	var roleExists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, AppRole).Scan(&roleExists); err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	if !roleExists {
		if _, err := conn.Exec(ctx, "CREATE ROLE "+app+" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"); err != nil {
			return fmt.Errorf("private postgres: create role %s: %w", AppRole, err)
		}
	}
	if !fast && c.appPassfile == "" {
		password := newPassword()
		for _, set := range []string{"SET password_encryption = 'scram-sha-256'", "SET log_statement = 'none'"} {
			if _, err := conn.Exec(ctx, set); err != nil {
				return fmt.Errorf("private postgres: %s: %w", set, err)
			}
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+app+" PASSWORD '"+password+"'"); err != nil {
			return fmt.Errorf("private postgres: set %s password: %w", AppRole, err)
		}
		p := filepath.Join(c.dir, appPassFile)
		if err := writeSecret(p, "*:*:*:"+AppRole+":"+password+"\n"); err != nil {
			return fmt.Errorf("private postgres: write %s: %w", p, err)
		}
		c.appPassfile = p
	}
	var owner string
	err = conn.QueryRow(ctx, `SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1`, Database).Scan(&owner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{Database}.Sanitize()+" OWNER "+app); err != nil {
			return fmt.Errorf("private postgres: create database: %w", err)
		}
	case err != nil:
		return fmt.Errorf("private postgres: %w", err)
	case owner != AppRole:
		return c.handOver(ctx)
	}
	return nil
}

// handOver gives the database of an earlier regressd, and what Role
// created in it, to AppRole.
func (c *Cluster) handOver(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.AdminURL(Database))
	if err != nil {
		return fmt.Errorf("private postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{Database}.Sanitize()+" OWNER TO "+pgx.Identifier{AppRole}.Sanitize()); err != nil {
		return fmt.Errorf("private postgres: hand the database to %s: %w", AppRole, err)
	}
	if _, err := conn.Exec(ctx, handOverSQL); err != nil {
		return fmt.Errorf("private postgres: hand the tables to %s: %w", AppRole, err)
	}
	c.logger.Info("private postgres: the database now belongs to the unprivileged role", "role", AppRole)
	return nil
}

// handOverSQL gives Role's schemas, tables and views in the database to
// AppRole (a table's indexes and sequences follow it).
const handOverSQL = `DO $$
DECLARE r record;
BEGIN
	FOR r IN SELECT nspname FROM pg_namespace
		WHERE nspowner = '` + Role + `'::regrole AND nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('information_schema', 'public') LOOP
		EXECUTE format('ALTER SCHEMA %I OWNER TO ` + AppRole + `', r.nspname);
	END LOOP;
	FOR r IN SELECT n.nspname, c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relowner = '` + Role + `'::regrole AND c.relkind IN ('r', 'p', 'v', 'm')
			AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema' LOOP
		IF r.relkind = 'm' THEN
			EXECUTE format('ALTER MATERIALIZED VIEW %I.%I OWNER TO ` + AppRole + `', r.nspname, r.relname);
		ELSE
			EXECUTE format('ALTER TABLE %I.%I OWNER TO ` + AppRole + `', r.nspname, r.relname);
		END IF;
	END LOOP;
END $$`

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

// Port is the cluster's TCP port on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }
