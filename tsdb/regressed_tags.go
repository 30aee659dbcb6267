package tsdb

// The tag columns an output table is keyed on: fixed by the first source
// that writes it, so that sources sharing a table cannot rebuild each
// other's identity index.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// identityTags returns the tag columns of the output table's identity
// indexes (one set per index, each sorted), none when the table or index is
// not there yet. The columns an index covers through coalesce are recorded
// as its dependencies in pg_depend, its plain ones too.
func identityTags(rows pgx.Rows, s Series) ([][]string, error) {
	var out [][]string
	var name string
	var tags []string
	if _, err := pgx.ForEachRow(rows, []any{&name, &tags}, func() error {
		slices.Sort(tags)
		out = append(out, slices.Clone(tags))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("describe %s's identity: %w", s.OutputName(), err)
	}
	return out, nil
}

// queueIdentityTags queues on b the query identityTags reads.
func queueIdentityTags(b *pgx.Batch, s Series) {
	b.Queue(`
		SELECT i.relname::text, coalesce(array_agg(DISTINCT a.attname::text) FILTER (WHERE a.attname NOT IN ('source', 'target', 'model', 'time', 'value')), '{}')
		FROM pg_catalog.pg_index x
		JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
		JOIN pg_catalog.pg_class c ON c.oid = x.indrelid
		LEFT JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = x.indexrelid
			AND d.refclassid = 'pg_catalog.pg_class'::regclass AND d.refobjid = x.indrelid AND d.refobjsubid > 0
		LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = d.refobjsubid
		WHERE c.relname = $1 AND c.relnamespace = `+inSchema(2)+` AND i.relname LIKE 'regressd\_ident\_%'
		GROUP BY i.relname`, s.Output(), s.Schema)
}

type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// checkIdentityTags returns a problem when the output table is keyed on
// other tag columns than the series' and holds predictions of another
// source: the table is that source's, and re-keying it would break its
// writes. A table only this source has written follows the source's tag
// columns (a tag column added to the source).
// sets are the table's identity tag sets (identityTags).
func checkIdentityTags(ctx context.Context, q querier, s Series, sets [][]string) (string, error) {
	ours := slices.Clone(s.TagColumns)
	slices.Sort(ours)
	for _, set := range sets {
		if slices.Equal(set, ours) {
			continue
		}
		rows, err := q.Query(ctx, fmt.Sprintf(`SELECT DISTINCT source FROM %s WHERE source <> $1 ORDER BY source LIMIT 3`, s.ident().Sanitize()), s.Measurement)
		if err != nil {
			return "", fmt.Errorf("read %s's sources: %w", s.OutputName(), err)
		}
		others, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("read %s's sources: %w", s.OutputName(), err)
		}
		if len(others) == 0 {
			continue
		}
		return fmt.Sprintf("it is keyed on the tag columns %s of the sources already in it (%s), and source %q has the tag columns %s; sources with different tag columns need output tables of their own: give this trigger another output_measurement",
			tagSet(set), quoteList(others), s.Measurement, tagSet(ours)), nil
	}
	return "", nil
}

func tagSet(tags []string) string {
	if len(tags) == 0 {
		return "(none)"
	}
	return "(" + strings.Join(tags, ", ") + ")"
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
