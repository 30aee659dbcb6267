package tsdb

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoTable means the measurement table does not exist.
var ErrNoTable = errors.New("table does not exist")

// MaxIdentifier is PostgreSQL's identifier limit in bytes.
const MaxIdentifier = 63

// RegressedSuffix names the output table: <measurement>_regressed.
const RegressedSuffix = "_regressed"

// Kind is what regressd makes of a column.
type Kind int

// Column kinds.
const (
	KindOther Kind = iota
	KindTime
	KindTag
	KindField
)

func (k Kind) String() string {
	return [...]string{"other", "time", "tag", "field"}[k]
}

// Column is one column of a measurement.
type Column struct {
	Name     string
	DataType string
	Kind     Kind
}

// Table is a measurement's columns in table order.
type Table struct {
	Name    string
	Columns []Column
}

// Column returns the named column.
func (t Table) Column(name string) (Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Tags lists the tag columns in table order.
// LocalTime reports whether the time column is timestamp without time
// zone: wall-clock times of the session's TimeZone.
func (t Table) LocalTime() bool {
	for _, c := range t.Columns {
		if c.Kind == KindTime {
			return c.DataType == "timestamp without time zone"
		}
	}
	return false
}

// Decimal returns the field columns of type numeric.
func (t Table) Decimal() map[string]bool {
	out := map[string]bool{}
	for _, c := range t.Columns {
		if c.Kind == KindField && c.DataType == "numeric" {
			out[c.Name] = true
		}
	}
	return out
}

func (t Table) Tags() []string {
	var out []string
	for _, c := range t.Columns {
		if c.Kind == KindTag {
			out = append(out, c.Name)
		}
	}
	return out
}

// DB reads and writes measurement tables.
type DB struct {
	pool *pgxpool.Pool
	// cols keeps windowCols between reads: a window's rows are gathered
	// there and then copied into Arrow, so the buffers can serve the next
	// read instead of being grown again from nothing.
	cols sync.Pool
}

// New wraps a pool.
func New(pool *pgxpool.Pool) *DB { return &DB{pool: pool} }

// Pool is the underlying pool.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Describe returns a measurement's columns, from the first schema on the
// search path that has the table.
func (db *DB) Describe(ctx context.Context, measurement string) (Table, error) {
	rows, err := db.pool.Query(ctx, `
		SELECT c.column_name, c.data_type
		FROM information_schema.columns c
		WHERE c.table_name = $1
		  AND c.table_schema = (
		      SELECT n.nspname FROM pg_catalog.pg_class k
		      JOIN pg_catalog.pg_namespace n ON n.oid = k.relnamespace
		      WHERE k.relname = $1 AND k.relkind IN ('r', 'p', 'v', 'm', 'f')
		        AND n.nspname = ANY (current_schemas(false))
		      ORDER BY array_position(current_schemas(false), n.nspname) LIMIT 1)
		ORDER BY c.ordinal_position`, measurement)
	if err != nil {
		return Table{}, fmt.Errorf("describe %q: %w", measurement, err)
	}
	defer rows.Close()
	t := Table{Name: measurement}
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.DataType); err != nil {
			return Table{}, fmt.Errorf("describe %q: %w", measurement, err)
		}
		c.Kind = kindOf(c.Name, c.DataType)
		t.Columns = append(t.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return Table{}, fmt.Errorf("describe %q: %w", measurement, err)
	}
	if len(t.Columns) == 0 {
		return Table{}, fmt.Errorf("measurement %q: %w", measurement, ErrNoTable)
	}
	return t, nil
}

func kindOf(name, dataType string) Kind {
	switch dataType {
	case "timestamp with time zone", "timestamp without time zone":
		if name == "time" {
			return KindTime
		}
	case "smallint", "integer", "bigint", "real", "double precision", "numeric":
		return KindField
	case "text", "character varying", "character", "name", "USER-DEFINED":
		// USER-DEFINED covers enums, which read as text.
		return KindTag
	}
	return KindOther
}
