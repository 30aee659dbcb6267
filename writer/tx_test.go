package writer

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A pipelinedTx commits with its last batch, and a statement failing in a
// batch leaves nothing of the transaction behind and the connection
// usable once rolled back.
func TestPipelinedTxCommitsWithItsLastBatchAndRollsBackAFailure(t *testing.T) {
	ctx := context.Background()
	_, pool := newTestWriter(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE tx_probe (k int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx := &pipelinedTx{conn: conn.Conn()}

	// Committed: BEGIN with the first statement, COMMIT with the last.
	b := beginBatch()
	b.Queue(`INSERT INTO tx_probe VALUES (1)`)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'T' {
		t.Fatalf("after the first batch the connection is in state %q, want a transaction (T)", st)
	}
	var last pgx.Batch
	last.Queue(`INSERT INTO tx_probe VALUES (2)`)
	queueCommit(&last)
	br := tx.SendBatch(ctx, &last)
	if _, err := br.Exec(); err != nil {
		t.Fatal(err)
	}
	if err := commitResult(br); err != nil {
		t.Fatal(err)
	}
	if err := br.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit after the batch's COMMIT: %v", err)
	}

	// Failed: the duplicate key aborts the batch, its COMMIT is not run.
	b = beginBatch()
	b.Queue(`INSERT INTO tx_probe VALUES (3)`)
	b.Queue(`INSERT INTO tx_probe VALUES (1)`)
	queueCommit(b)
	br = tx.SendBatch(ctx, b)
	var errs []error
	for range 4 {
		if _, err := br.Exec(); err != nil {
			errs = append(errs, err)
		}
	}
	br.Close()
	if len(errs) == 0 {
		t.Fatal("a batch with a duplicate key succeeded")
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("Commit of a failed transaction returned no error")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		t.Fatalf("after Rollback the connection is in state %q, want idle (I)", st)
	}
	var got string
	if err := pool.QueryRow(ctx, `SELECT string_agg(k::text, ',' ORDER BY k) FROM tx_probe`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "1,2" {
		t.Fatalf("rows %s, want 1,2 (the failed transaction's row 3 rolled back)", got)
	}
}

// Every result of a task goes to one committer, and tasks spread over them.
func TestResultsOfATaskShareACommitter(t *testing.T) {
	w := &Writer{queues: make([]chan *pending, 4)}
	for i := range w.queues {
		w.queues[i] = make(chan *pending)
	}
	used := map[chan *pending]bool{}
	for i := range 64 {
		id := fmt.Sprintf("t_%020x", i*7919)
		q := w.queueOf(id)
		if w.queueOf(id) != q {
			t.Fatalf("task %s maps to two committers", id)
		}
		used[q] = true
	}
	if len(used) != len(w.queues) {
		t.Fatalf("64 tasks went to %d of %d committers", len(used), len(w.queues))
	}
}
