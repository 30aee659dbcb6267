package writer

// A transaction whose BEGIN travels with its first statements and whose
// COMMIT with its last: a group commit is four round trips (claims,
// savepoint, COPY, ledger updates) instead of six. pgx.BeginFunc sends
// BEGIN and COMMIT on their own; under load every round trip waits for
// PostgreSQL's backend and this process to be scheduled again.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipelinedTx is a pgx.Tx on one connection whose BEGIN is the first
// statement of the first batch its user sends (queued by beginBatch) and
// whose COMMIT may be the last of another (queueCommit). Nested
// transactions are not supported.
type pipelinedTx struct {
	conn *pgx.Conn
}

var _ pgx.Tx = (*pipelinedTx)(nil)

// beginBatch is a batch that opens the transaction; queue the first
// statements after it.
func beginBatch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	return b
}

// queueCommit ends b with the transaction's COMMIT; read its result with
// commitResult.
func queueCommit(b *pgx.Batch) { b.Queue("COMMIT") }

// commitResult reads the result of the COMMIT queueCommit queued: a
// transaction that had failed answers ROLLBACK, which is an error.
func commitResult(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() != "COMMIT" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *pipelinedTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("writer: nested transactions are not supported")
}

// Commit commits unless the COMMIT went with the last batch already (the
// connection is idle again).
func (t *pipelinedTx) Commit(ctx context.Context) error {
	switch t.conn.PgConn().TxStatus() {
	case 'I':
		return nil
	case 'T':
		tag, err := t.conn.Exec(ctx, "COMMIT")
		if err == nil && tag.String() != "COMMIT" {
			err = pgx.ErrTxCommitRollback
		}
		return err
	default:
		return pgx.ErrTxCommitRollback
	}
}

// Rollback ends a transaction still open; after a COMMIT there is none.
func (t *pipelinedTx) Rollback(ctx context.Context) error {
	if t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

func (t *pipelinedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *pipelinedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

func (t *pipelinedTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipelinedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipelinedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *pipelinedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *pipelinedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *pipelinedTx) Conn() *pgx.Conn { return t.conn }
