package schemas

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key that serialises migrations when
// several processes start at once.
const migrationLock = 0x7265677265737364 // "regressd"

// Migrate applies the embedded SQL migrations that the database has not seen,
// in order, each in its own transaction. It is safe to call from many
// processes at once and on every start.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLock))
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS regressd_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migrate: bad migration name %q", base)
		}
		var seen bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM regressd_migrations WHERE version = $1)`, version).Scan(&seen); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if seen {
			continue
		}
		sql, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", base, err)
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("migrate %s: %w", base, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO regressd_migrations (version, name) VALUES ($1, $2)`, version, base); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("migrate %s: %w", base, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("migrate %s: %w", base, err)
		}
	}
	return nil
}
