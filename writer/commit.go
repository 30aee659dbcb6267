package writer

// Group commit: handlers queue their results; committers write what is
// queued together, predictions and ledger in one transaction.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// pending is a decoded result waiting for a committer.
type pending struct {
	r    result
	done chan outcome
}

// outcome is a result's write: its error, or the task's status after it
// ("" when unknown: a verdict, or a result written before).
type outcome struct {
	status schemas.Status
	err    error
}

// maxGroup bounds the results one transaction commits.
const maxGroup = 16

// commitLoop writes the results queued on q a group at a time until ctx
// ends.
func (w *Writer) commitLoop(ctx context.Context, q chan *pending) {
	for {
		var group []*pending
		select {
		case <-ctx.Done():
			return
		case p := <-q:
			group = append(group, p)
		}
	more:
		for len(group) < maxGroup {
			select {
			case p := <-q:
				group = append(group, p)
			default:
				break more
			}
		}
		for i, o := range w.applyGroup(ctx, group) {
			group[i].done <- o
		}
	}
}

// queueOf is the committer queue of a task. Every result of a task goes to
// one committer: two transactions of this writer never hold one task's
// ledger row at once (the second would wait on the first's commit), and a
// task's results that arrive while its committer is busy share its next
// transaction rather than each paying one.
func (w *Writer) queueOf(taskID string) chan *pending {
	h := fnv.New32a()
	h.Write([]byte(taskID))
	return w.queues[h.Sum32()%uint32(len(w.queues))]
}

// write hands a result to its task's committer and waits for its
// transaction.
func (w *Writer) write(ctx context.Context, r result) outcome {
	p := &pending{r: r, done: make(chan outcome, 1)}
	select {
	case w.queueOf(r.Meta.TaskID) <- p:
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	}
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
		return outcome{err: ctx.Err()}
	}
}

// applyGroup commits a group of results in one transaction, sorting group
// in place; the outcomes follow the sorted order. When that transaction
// fails, each result is applied on its own, so one bad result fails alone.
func (w *Writer) applyGroup(ctx context.Context, group []*pending) []outcome {
	if len(group) == 1 {
		return []outcome{w.apply(ctx, group[0].r)}
	}
	// One order for every transaction: two groups that share tasks then
	// lock their ledger rows in the same order and cannot deadlock.
	slices.SortFunc(group, func(a, b *pending) int {
		return cmp.Or(strings.Compare(a.r.Meta.TaskID, b.r.Meta.TaskID), cmp.Compare(a.r.Batch, b.r.Batch))
	})
	rs := make([]result, len(group))
	for i, p := range group {
		rs[i] = p.r
	}
	statuses, err := w.commit(ctx, rs)
	if err != nil {
		w.log.Debug("group commit failed; writing its results one by one", "results", len(group), "err", err)
		out := make([]outcome, len(group))
		for i, p := range group {
			out[i] = w.apply(ctx, p.r)
		}
		return out
	}
	out := make([]outcome, len(group))
	for i, st := range statuses {
		out[i].status = st
	}
	return out
}

// apply commits one result: predictions and ledger in one transaction.
// Predictions an output table cannot hold (made by someone else, with a
// shape the producer's check cannot see: a column too short, a check, rows
// breaking the identity index) are recorded as a failed batch answering
// 409: no retry would help, and the task must end rather than wait.
func (w *Writer) apply(ctx context.Context, r result) outcome {
	statuses, err := w.commit(ctx, []result{r})
	if (errors.Is(err, tsdb.ErrIncompatible) || errors.Is(err, tsdb.ErrRefused)) && r.Status == schemas.StatusOK {
		w.log.Error("batch not written", "task_id", r.Meta.TaskID, "batch", r.Batch, "err", err)
		msg := err.Error()
		if errors.Is(err, tsdb.ErrRefused) {
			msg = fmt.Sprintf("%s: %v", outputSeries(r.Meta).OutputName(), err)
		}
		r.Status, r.Message, r.points, r.Code = schemas.StatusFailed, msg, nil, http.StatusConflict
		statuses, err = w.commit(ctx, []result{r})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ForeignKeyViolation {
		w.forget(r.Meta.TaskID) // the task row went away: create it again on the retry
	}
	if err != nil {
		return outcome{err: err}
	}
	return outcome{status: statuses[0]}
}

// commit writes results in one transaction, their tasks' ledger rows
// first, and returns for each the status its handler publishes (see
// applyIn).
func (w *Writer) commit(ctx context.Context, rs []result) ([]schemas.Status, error) {
	// The tasks' rows are created in the results' transaction, in the round
	// trip of their claims: one commit (a WAL flush) per group, not one
	// more per new task. Every result of a task goes to one committer
	// (queueOf), so no other transaction of this writer waits on the
	// uncommitted row; a writer in another process that holds a result of
	// the same task waits for this commit, and then finds the row.
	pre := beginBatch()
	queued := w.taskRows(pre, rs)
	var n tally
	committed := w.cfg.Metrics.Time(metrics.StageWriterCommit)
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("write results: %w", err)
	}
	// A connection left in a transaction (a failed ROLLBACK) is closed by
	// Release, not reused.
	defer conn.Release()
	tx := &pipelinedTx{conn: conn.Conn()}
	statuses, ensured, err := w.applyIn(ctx, tx, pre, true, rs, &n, nil)
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	committed()
	n.record(w.cfg.Metrics)
	w.markEnsured(ensured...) // only now: DDL rolled back with a failed transaction must run again
	w.rememberTasks(queued)
	return statuses, nil
}

// taskRows queues on b the creation of the ledger rows of the tasks of rs
// (sorted by task) this writer does not know to exist; queued are their
// metas, for rememberTasks once the rows are committed. It is idempotent,
// and a task row with no batch settled yet is the truth about a running
// task. Once a row holds its task's batches, later results need not ask
// again.
func (w *Writer) taskRows(b *pgx.Batch, rs []result) (queued []schemas.TaskMeta) {
	for i, r := range rs {
		if w.isKnown(r.Meta.TaskID) || (i > 0 && rs[i-1].Meta.TaskID == r.Meta.TaskID) {
			continue
		}
		queued = append(queued, r.Meta)
	}
	if len(queued) > 0 {
		queueTasks(b, queued)
	}
	return queued
}

// rememberTasks marks tasks whose rows hold their batches as known.
func (w *Writer) rememberTasks(ms []schemas.TaskMeta) {
	for _, m := range ms {
		if m.Batches > 0 {
			w.remember(m.TaskID)
		}
	}
}

// ensureTaskRows creates the tasks' ledger rows (taskRows) in one round
// trip of their own, outside the results' transaction: a pack's series
// are tasks of their own, and a pack's results go to no committer.
func (w *Writer) ensureTaskRows(ctx context.Context, rs []result) error {
	var b pgx.Batch
	queued := w.taskRows(&b, rs)
	if len(queued) == 0 {
		return nil
	}
	if err := w.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("ledger task: %w", err)
	}
	w.rememberTasks(queued)
	return nil
}

// statusCovered is the status of a result whose task's summary a later
// result of the same transaction publishes: its handler publishes nothing.
const statusCovered schemas.Status = "covered"

// applyIn writes results (sorted by task and batch) in tx: their batches
// claimed, their predictions (the points of one table in one COPY) and the
// ledger update of each task. It returns the regressed tables' keys to mark
// as ensured once tx commits, and for each result the status its handler
// publishes: the task's status after the transaction, statusCovered where a
// later result of the task carries it, or "" when unknown (a verdict, or a
// result written before).
// A pack's results (counted not nil: each of a series of its own, batch 0)
// settle their tasks in one statement (finishSeries), which adds the
// series it counts into their run to *counted. The statements queued in
// pre (nil: none) run first, in the claims' round trip; with commit, the
// tasks' updates end with tx's COMMIT (pipelinedTx).
func (w *Writer) applyIn(ctx context.Context, tx pgx.Tx, pre *pgx.Batch, commit bool, rs []result, n *tally, counted *[]string) (statuses []schemas.Status, ensured []string, err error) {
	fresh, err := claimBatches(ctx, tx, pre, rs)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*settled, len(rs))
	var writes []tsdb.Write
	var writers []int // the result of each write
	ready := map[string]bool{}
	for i, r := range rs {
		switch {
		case !fresh[i]:
			w.log.Debug("result already written; redelivery ignored", "task_id", r.Meta.TaskID, "batch", r.Batch)
			continue
		case r.Batch < 0:
			settled, err := settleVerdict(ctx, tx, r.Meta.TaskID, r.Status, r.Message, r.Code)
			if err != nil {
				return nil, nil, err
			}
			if settled {
				n.settled(r.Status, r.Meta)
			}
			continue
		}
		out[i] = &settled{}
		if r.Status != schemas.StatusOK {
			continue
		}
		if r.Meta.DryRun {
			out[i].preview = r.preview
			if out[i].preview == nil {
				out[i].preview = []schemas.Prediction{}
			}
			continue
		}
		series := outputSeries(r.Meta)
		if key := tableKey(series); !ready[key] {
			k, err := w.ensure(ctx, tx, series)
			if err != nil {
				return nil, nil, err
			}
			if k != "" {
				ensured = append(ensured, k)
			}
			ready[key] = true
		}
		writes, writers = append(writes, tsdb.Write{Series: series, Points: r.points, KeepExisting: r.Meta.SkipExisting, Quantiles: r.quantiles}), append(writers, i)
	}
	written, err := tsdb.WriteGroup(ctx, tx, writes)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range writers {
		out[i].written = written[k]
		n.wrote(writes[k], written[k])
	}
	var tasks map[string]schemas.Status
	if counted != nil {
		tasks, err = finishSeries(ctx, tx, rs, out, counted)
	} else {
		tasks, err = finishTasks(ctx, tx, rs, out, commit)
	}
	if err != nil {
		return nil, nil, err
	}
	statuses = make([]schemas.Status, len(rs))
	for i, r := range rs {
		if out[i] == nil {
			continue
		}
		w.log.Debug("result written", "task_id", r.Meta.TaskID, "batch", r.Batch, "status", r.Status, "written", out[i].written)
		statuses[i] = tasks[r.Meta.TaskID]
		for j := i + 1; j < len(rs) && rs[j].Meta.TaskID == r.Meta.TaskID; j++ {
			if out[j] != nil && statuses[i] != schemas.StatusRunning {
				statuses[i] = statusCovered
				break
			}
		}
		if statuses[i] != statusCovered && statuses[i].Done() {
			n.settled(statuses[i], r.Meta) // the task's last result: it ended in this transaction
		}
	}
	return statuses, ensured, nil
}
