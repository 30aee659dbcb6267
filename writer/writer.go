package writer

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
)

// Config configures a Writer.
type Config struct {
	// Concurrency is the number of transactions written at once. Default 4.
	// Each commits every result that arrived while the previous one ran
	// (group commit), up to maxGroup.
	Concurrency int
	Logger      *slog.Logger
}

// Writer writes results.
type Writer struct {
	js    jetstream.JetStream
	pool  *pgxpool.Pool
	tasks jetstream.KeyValue
	obj   *bus.Objects
	cfg   Config
	log   *slog.Logger

	metas   schemas.TaskMetas
	mu      sync.Mutex
	ensured map[string]bool // regressed tables known to match a tag set
	// known are tasks whose ledger row holds their batches: their later
	// results skip ensureTask. Bounded, oldest forgotten first.
	known      map[string]struct{}
	knownOrder []string
	// progress is when this writer last published a running task's summary.
	progress map[string]time.Time
	// queue feeds the committers.
	queue chan *pending
}

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

// maxKnown bounds the tasks a writer remembers as created.
const maxKnown = 4096

// New binds the task bucket.
func New(ctx context.Context, js jetstream.JetStream, pool *pgxpool.Pool, cfg Config) (*Writer, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		return nil, fmt.Errorf("open task bucket: %w", err)
	}
	obj, err := bus.OpenObjects(ctx, js, schemas.StoreContext)
	if err != nil {
		return nil, err
	}
	return &Writer{js: js, pool: pool, tasks: kv, obj: obj, cfg: cfg, log: cfg.Logger, ensured: map[string]bool{},
		known: map[string]struct{}{}, progress: map[string]time.Time{}, queue: make(chan *pending)}, nil
}

// Run consumes results until ctx ends, and returns once every goroutine it
// started has. Handlers (maxGroup per committer)
// decode and queue their results; Concurrency committers each write what
// is queued in one transaction. A commit pays a WAL flush and two round
// trips, so results that arrive together share one.
func (w *Writer) Run(ctx context.Context) error {
	// The committers outlive ctx: handlers still finishing in Consume's
	// grace hand them their results. They stop once Consume returned, when
	// no handler is waiting any more, and Run returns when they have.
	commit, stop := context.WithCancel(context.WithoutCancel(ctx))
	var committers sync.WaitGroup
	defer committers.Wait()
	defer stop()
	for range w.cfg.Concurrency {
		committers.Add(1)
		go func() {
			defer committers.Done()
			w.commitLoop(commit)
		}()
	}
	return bus.Consume(ctx, w.js, bus.ConsumerConfig{
		Stream: schemas.StreamResults, Durable: "writer", Filter: schemas.SubjectResults + ">",
		// Results hold predictions already paid for: a failing write is
		// retried (1s … 60s apart) through about 45 minutes of database
		// trouble before it is dead-lettered and its batch settled as failed.
		AckWait: bus.DefaultAckWait, MaxDeliver: 50,
		Concurrency: w.cfg.Concurrency * maxGroup, OnDeadLetter: w.onDeadLetter, Logger: w.log,
	}, w.handle)
}

// commitLoop writes queued results a group at a time until ctx ends.
func (w *Writer) commitLoop(ctx context.Context) {
	for {
		var group []*pending
		select {
		case <-ctx.Done():
			return
		case p := <-w.queue:
			group = append(group, p)
		}
	more:
		for len(group) < maxGroup {
			select {
			case p := <-w.queue:
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

// write hands a result to a committer and waits for its transaction.
func (w *Writer) write(ctx context.Context, r result) outcome {
	p := &pending{r: r, done: make(chan outcome, 1)}
	select {
	case w.queue <- p:
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

// result is a decoded result message: its headers and its predictions.
type result struct {
	schemas.Result
	points []tsdb.Point
}

func (w *Writer) decode(msg jetstream.Msg) (result, error) {
	var r result
	var err error
	if r.Result, err = w.metas.DecodeResult(msg.Headers()); err != nil {
		return r, err
	}
	if r.Status != schemas.StatusOK {
		return r, nil
	}
	rec, err := schemas.DecodeRecord(msg.Data(), schemas.ResultSchema)
	if err != nil {
		return r, err
	}
	defer rec.Release()
	times := rec.Column(0).(*array.Timestamp)
	vals := rec.Column(1).(*array.Float64)
	r.Rows = int(rec.NumRows())
	r.points = make([]tsdb.Point, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		if vals.IsNull(i) {
			continue // the model gave no prediction for this row
		}
		r.points = append(r.points, tsdb.Point{Time: times.Value(i).ToTime(arrow.Microsecond).UTC(), Value: vals.Value(i)})
	}
	return r, nil
}

func (w *Writer) handle(ctx context.Context, msg jetstream.Msg) error {
	r, err := w.decode(msg)
	if err != nil {
		return bus.Permanent(err)
	}
	o := w.write(ctx, r)
	if o.err != nil {
		return o.err
	}
	s, err := w.publishSummary(ctx, r.Meta.TaskID, o.status)
	if err != nil {
		return err
	}
	// The ledger holds the result: one delivered again because its ack was
	// lost writes nothing, so the ack is not waited for.
	if err := msg.Ack(); err != nil {
		return err
	}
	w.forgetContext(ctx, s, r.Meta.ContextNUID)
	return nil
}

// forgetContext removes the context of a task that ended with every batch
// written: no batch of it will run again. A task with failed batches keeps
// its context until the store's TTL, for 'regressd dlq retry'. nuid names
// the context's chunks when known.
func (w *Writer) forgetContext(ctx context.Context, s schemas.TaskSummary, nuid string) {
	if !s.Done() || s.Batches == 0 || s.BatchesFailed > 0 || s.BatchesDone < s.Batches {
		return
	}
	name := schemas.ContextObject(s.TaskID)
	var err error
	if nuid != "" {
		err = w.obj.ForgetInfo(ctx, &jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{Name: name}, NUID: nuid})
	} else {
		err = w.obj.Forget(ctx, name)
	}
	if err != nil {
		w.log.Warn("context not forgotten; it expires with the context store's TTL", "task_id", s.TaskID, "err", err)
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
			msg = fmt.Sprintf("%s: %v", tsdb.RegressedName(r.Meta.Measurement), err)
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

// commit writes results in one transaction, after their tasks' ledger rows,
// and returns for each the status its handler publishes (see applyIn).
func (w *Writer) commit(ctx context.Context, rs []result) ([]schemas.Status, error) {
	if err := w.ensureTaskRows(ctx, rs); err != nil {
		return nil, err
	}
	var statuses []schemas.Status
	var ensured []string
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		var err error
		statuses, ensured, err = w.applyIn(ctx, tx, rs)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.markEnsured(ensured...) // only now: DDL rolled back with a failed transaction must run again
	return statuses, nil
}

// ensureTaskRows creates the tasks' ledger rows, all in one round trip and
// not in the results' transaction: inside it, every other result of a task
// would wait on its INSERT until the whole transaction committed. It is
// idempotent, and a task row with no batch settled yet is the truth about
// a running task. Once a row holds its task's batches, later results need
// not ask again. rs is sorted by task.
func (w *Writer) ensureTaskRows(ctx context.Context, rs []result) error {
	var b pgx.Batch
	var queued []schemas.TaskMeta
	for i, r := range rs {
		if w.isKnown(r.Meta.TaskID) || (i > 0 && rs[i-1].Meta.TaskID == r.Meta.TaskID) {
			continue
		}
		queueTask(&b, r.Meta)
		queued = append(queued, r.Meta)
	}
	if len(queued) == 0 {
		return nil
	}
	if err := w.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("ledger task: %w", err)
	}
	for _, m := range queued {
		if m.Batches > 0 {
			w.remember(m.TaskID)
		}
	}
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
func (w *Writer) applyIn(ctx context.Context, tx pgx.Tx, rs []result) (statuses []schemas.Status, ensured []string, err error) {
	fresh, err := claimBatches(ctx, tx, rs)
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
			if err := settleVerdict(ctx, tx, r.Meta.TaskID, r.Status, r.Message, r.Code); err != nil {
				return nil, nil, err
			}
			continue
		}
		out[i] = &settled{}
		if r.Status != schemas.StatusOK {
			continue
		}
		if r.Meta.DryRun {
			out[i].preview = make([]schemas.Prediction, len(r.points))
			for k, p := range r.points {
				out[i].preview[k] = schemas.Prediction{Time: p.Time, Value: p.Value}
			}
			continue
		}
		series := tsdb.Series{Measurement: r.Meta.Measurement, Target: r.Meta.Target, Model: r.Meta.Model,
			TagColumns: r.Meta.TagColumns, Tags: r.Meta.Series}
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
		writes, writers = append(writes, tsdb.Write{Series: series, Points: r.points, KeepExisting: r.Meta.SkipExisting}), append(writers, i)
	}
	written, err := tsdb.WriteGroup(ctx, tx, writes)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range writers {
		out[i].written = written[k]
	}
	tasks, err := finishTasks(ctx, tx, rs, out)
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
	}
	return statuses, ensured, nil
}

// tableKey names a regressed table and the tag set it is ensured for.
func tableKey(s tsdb.Series) string {
	return s.Measurement + "\x00" + strings.Join(s.TagColumns, "\x00")
}

func (w *Writer) markEnsured(keys ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range keys {
		w.ensured[k] = true
	}
}

// progressEvery spaces the progress summaries of a running task.
const progressEvery = time.Second

// progressDue reports whether a task's summary should be published now, and
// if so notes the time: always when done (and the task is forgotten),
// otherwise once progressEvery has passed since this writer first saw the
// task or last published its progress. A task done within progressEvery
// costs one publication.
func (w *Writer) progressDue(taskID string, done bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if done {
		delete(w.progress, taskID)
		return true
	}
	now := time.Now()
	last, ok := w.progress[taskID]
	if ok && now.Sub(last) < progressEvery {
		return false
	}
	if len(w.progress) >= maxKnown {
		clear(w.progress) // tasks whose end another writer saw
	}
	w.progress[taskID] = now
	return ok
}

func (w *Writer) isKnown(taskID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.known[taskID]
	return ok
}

func (w *Writer) remember(taskID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.known[taskID]; ok {
		return
	}
	w.known[taskID] = struct{}{}
	w.knownOrder = append(w.knownOrder, taskID)
	if len(w.knownOrder) > maxKnown {
		delete(w.known, w.knownOrder[0])
		w.knownOrder = w.knownOrder[1:]
	}
}

func (w *Writer) forget(taskID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.known, taskID)
}

// ensure creates or adapts the regressed table once per process and tag set.
// It returns the key to mark as ensured once the transaction commits, or ""
// when the table was known to be ready.
func (w *Writer) ensure(ctx context.Context, tx pgx.Tx, s tsdb.Series) (string, error) {
	key := tableKey(s)
	w.mu.Lock()
	done := w.ensured[key]
	w.mu.Unlock()
	if done {
		return "", nil
	}
	// Serialise DDL on one table across writers.
	h := fnv.New64a()
	h.Write([]byte(tsdb.RegressedName(s.Measurement)))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
		return "", err
	}
	if err := tsdb.EnsureRegressed(ctx, tx, s); err != nil {
		return "", err
	}
	return key, nil
}

// publishSummary copies the task's ledger state into the task bucket, where
// the engine endpoint waits for it. Results of one task are written
// concurrently (several writers, or one writer's concurrency), so a summary
// read earlier may arrive later: it replaces the stored one only if it has
// seen more of the task, so the final state is never overwritten. A task's
// final state is always published; its progress at most once per
// progressEvery by this writer (each publication costs two round trips).
// status is the task's status after the result when known: a task known to
// be running has its ledger read only when its progress is due.
func (w *Writer) publishSummary(ctx context.Context, taskID string, status schemas.Status) (schemas.TaskSummary, error) {
	if status == statusCovered {
		return schemas.TaskSummary{TaskID: taskID}, nil
	}
	due := false
	if status == schemas.StatusRunning {
		// Known to be running: no need to read the ledger unless progress
		// is due.
		if !w.progressDue(taskID, false) {
			return schemas.TaskSummary{TaskID: taskID, Status: status}, nil
		}
		due = true
	}
	s, err := summary(ctx, w.pool, taskID)
	if err != nil {
		return s, err
	}
	if !due && !w.progressDue(taskID, s.Done()) {
		return s, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return s, err
	}
	for range 10 {
		err = w.putSummary(ctx, taskID, s, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // raced with another writer: read again
		}
		if tooLarge(err) {
			s.Predictions = nil
			s.Message = strings.TrimSpace(s.Message + " (dry-run predictions too many to return; run with a smaller window)")
			b, _ = json.Marshal(s)
			continue
		}
		break
	}
	if err != nil {
		return s, fmt.Errorf("publish task summary: %w", err)
	}
	return s, nil
}

// tooLarge reports whether a summary was refused for its size: by the
// task bucket's largest value, or by the server's largest message.
func tooLarge(err error) bool {
	return errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) || errors.Is(err, nats.ErrMaxPayload)
}

// putSummary stores b unless the stored summary has seen as much of the
// task. Most tasks have none stored yet (progress is published only for
// tasks that run longer than progressEvery), so it tries to create first.
// ErrKeyExists means a race with another writer: call again.
func (w *Writer) putSummary(ctx context.Context, taskID string, s schemas.TaskSummary, b []byte) error {
	_, err := w.tasks.Create(ctx, taskID, b)
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	e, err := w.tasks.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return jetstream.ErrKeyExists // removed since: create again
	}
	if err != nil {
		return err
	}
	var old schemas.TaskSummary
	if json.Unmarshal(e.Value(), &old) == nil && !newer(s, old) {
		return nil
	}
	_, err = w.tasks.Update(ctx, taskID, b, e.Revision())
	return err
}

// newer reports whether summary s has seen more of its task than old.
func newer(s, old schemas.TaskSummary) bool {
	ps, po := s.BatchesDone+s.BatchesFailed, old.BatchesDone+old.BatchesFailed
	switch {
	case ps != po:
		return ps > po
	case s.Done() != old.Done():
		return s.Done()
	}
	return s.Status != old.Status || s.Message != old.Message
}

// onDeadLetter settles a dead-lettered result of a real task as a failed
// batch (or a failed verdict), so the task still completes.
func (w *Writer) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	var r result
	var err error
	if r.Result, err = w.metas.DecodeResult(dl.Header); err != nil && !errors.Is(err, schemas.ErrUnknownStatus) {
		return nil // belongs to no task we can name
	}
	r.Status, r.Code, r.Body = schemas.StatusFailed, http.StatusInternalServerError, nil
	r.Message = "result dead-lettered (see 'regressd dlq list'): " + dl.Reason
	if o := w.apply(ctx, r); o.err != nil {
		return o.err
	}
	_, err = w.publishSummary(ctx, r.Meta.TaskID, "")
	return err
}
