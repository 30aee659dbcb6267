package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
	"github.com/regressd/regressd/tsdb"
)

// Config configures a Writer.
type Config struct {
	// Concurrency is the number of transactions written at once. Default 4.
	// Each committer owns the tasks queueOf gives it and commits every
	// result of them that arrived while its previous transaction ran (group
	// commit), up to maxGroup.
	Concurrency int
	Logger      *slog.Logger
	// Metrics records commits, rows written and tasks settled; nil
	// records nothing.
	Metrics *metrics.Metrics
	// Tracing continues each result's trace; nil traces nothing.
	Tracing *tracing.Provider
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
	// queues feed the committers, one each (queueOf).
	queues []chan *pending
}

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
	queues := make([]chan *pending, cfg.Concurrency)
	for i := range queues {
		queues[i] = make(chan *pending)
	}
	return &Writer{js: js, pool: pool, tasks: kv, obj: obj, cfg: cfg, log: cfg.Logger, ensured: map[string]bool{},
		known: map[string]struct{}{}, progress: map[string]time.Time{}, queues: queues}, nil
}

// Run consumes results until ctx ends, and returns once every goroutine it
// started has. Handlers (maxGroup per committer) decode and queue their
// results on their task's committer (queueOf); each of the Concurrency
// committers writes what is queued for it in one transaction. A commit
// pays a WAL flush and four round trips (pipelinedTx), so results that
// arrive together share one.
func (w *Writer) Run(ctx context.Context) error {
	// The committers outlive ctx: handlers still finishing in Consume's
	// grace hand them their results. They stop once Consume returned, when
	// no handler is waiting any more, and Run returns when they have.
	commit, stop := context.WithCancel(context.WithoutCancel(ctx))
	var committers sync.WaitGroup
	defer committers.Wait()
	defer stop()
	for _, q := range w.queues {
		committers.Add(1)
		go func() {
			defer committers.Done()
			w.commitLoop(commit, q)
		}()
	}
	return bus.Consume(ctx, w.js, bus.ConsumerConfig{
		Stream: schemas.StreamResults, Durable: "writer", Filter: schemas.SubjectResults + ">",
		// A failing write of predictions is attempted max_retries times in
		// all (1s, 2s, 4s … apart; see writeFailed). Other results only
		// settle the ledger: they are retried through about 45 minutes of
		// database trouble before they are dead-lettered.
		AckWait: bus.DefaultAckWait, MaxDeliver: 50,
		Concurrency: w.cfg.Concurrency * maxGroup, OnDeadLetter: w.onDeadLetter, Logger: w.log, DeadLetters: w.cfg.Metrics,
	}, w.cfg.Tracing.Handle("writer write", w.handle))
}

// result is a decoded result message: its headers and its predictions. A
// dry run's are its preview instead: every query row, in order, with or
// without a prediction.
type result struct {
	schemas.Result
	points  []tsdb.Point
	preview []schemas.Prediction
	// quantiles[i] are points[i]'s quantiles, at Meta.Quantiles' levels.
	quantiles [][]float64
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
	return r, r.decodeBody(msg.Data())
}

// decodeBody reads a StatusOK result's predictions (or a dry run's
// preview) from data.
func (r *result) decodeBody(data []byte) error {
	rec, err := schemas.DecodeRecord(data, schemas.ResultSchemaFor(r.Meta.Quantiles))
	if err != nil {
		return err
	}
	defer rec.Release()
	r.fromRecord(rec)
	return nil
}

// fromRecord reads a StatusOK result's predictions (or a dry run's
// preview) from rec, a record of them (schemas.ResultSchemaFor).
func (r *result) fromRecord(rec arrow.RecordBatch) {
	times := rec.Column(0).(*array.Timestamp)
	vals := rec.Column(1).(*array.Float64)
	r.Rows = int(rec.NumRows())
	if r.Meta.DryRun {
		r.preview = make([]schemas.Prediction, r.Rows)
		for i := range r.preview {
			r.preview[i].Time = times.Value(i).ToTime(arrow.Microsecond).UTC()
			if vals.IsValid(i) {
				v := vals.Value(i)
				r.preview[i].Value = &v
			}
		}
		previewQuantiles(rec, r.Meta.Quantiles, r.preview)
		return
	}
	r.points = make([]tsdb.Point, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		if vals.IsNull(i) {
			continue // the model gave no prediction for this row
		}
		r.points = append(r.points, tsdb.Point{Time: times.Value(i).ToTime(arrow.Microsecond).UTC(), Value: vals.Value(i)})
		if len(r.Meta.Quantiles) > 0 {
			r.quantiles = append(r.quantiles, rowQuantiles(rec, len(r.Meta.Quantiles), i))
		}
	}
}

func (w *Writer) handle(ctx context.Context, msg jetstream.Msg) error {
	if schemas.IsPack(msg.Headers()) {
		return w.handlePack(ctx, msg)
	}
	r, err := w.decode(msg)
	if err != nil {
		return bus.Permanent(err)
	}
	if r.Status == schemas.StatusSeries {
		return w.handleAnnounce(ctx, msg, r)
	}
	o := w.write(ctx, r)
	if o.err != nil {
		return w.writeFailed(ctx, msg, r, o.err)
	}
	if r.Meta.Parent != "" {
		return w.handleSeriesResult(ctx, msg, r, o.status)
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

// writeFailed is what a result whose write failed returns: its error, to
// try again, until the task's max_retries attempts at writing predictions
// are spent; then the result is dead-lettered (its predictions kept there
// for 'regressd dlq retry') and its batch settled as failed, as the
// plugin's write gives up after max_retries attempts. Results without
// predictions (failures, verdicts, dry runs) are retried as before: they
// only settle the ledger.
func (w *Writer) writeFailed(ctx context.Context, msg jetstream.Msg, r result, err error) error {
	if ctx.Err() != nil || r.Status != schemas.StatusOK || r.Meta.DryRun || r.Meta.MaxRetries <= 0 {
		return err
	}
	attempt := uint64(1)
	if md, _ := msg.Metadata(); md != nil {
		attempt = md.NumDelivered
	}
	if attempt < uint64(r.Meta.MaxRetries) {
		return err
	}
	return bus.Permanent(fmt.Errorf("write failed %d times (max_retries=%d): %w", attempt, r.Meta.MaxRetries, err))
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

// onDeadLetter settles a dead-lettered result of a real task as a failed
// batch (or a failed verdict), so the task still completes.
func (w *Writer) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	if schemas.IsPack(dl.Header) {
		return w.packDeadLetter(ctx, dl)
	}
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
	s, err := w.publishSummary(ctx, r.Meta.TaskID, "")
	if err != nil || r.Meta.Parent == "" || !s.Done() {
		return err
	}
	return w.countSeries(ctx, r.Meta.TaskID, r.Meta.Parent)
}
