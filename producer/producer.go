package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
	"github.com/regressd/regressd/tsdb"
)

// Config configures a Producer.
type Config struct {
	// Concurrency is the number of jobs read at once. Default 2.
	Concurrency int
	Logger      *slog.Logger
	// Metrics records window reads and rows; nil records nothing.
	Metrics *metrics.Metrics
	// Tracing continues each job's trace and carries it on in its batches;
	// nil traces nothing.
	Tracing *tracing.Provider
}

// Producer turns jobs into batches.
type Producer struct {
	js  jetstream.JetStream
	db  *tsdb.DB
	obj *bus.Objects
	cfg Config
	log *slog.Logger

	// planning holds the task ids this process is planning: a job delivered
	// again while its first delivery is still being planned here waits.
	planning sync.Map
}

// New binds the context object store.
func New(ctx context.Context, js jetstream.JetStream, db *tsdb.DB, cfg Config) (*Producer, error) {
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 2
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	obj, err := bus.OpenObjects(ctx, js, schemas.StoreContext)
	if err != nil {
		return nil, err
	}
	return &Producer{js: js, db: db, obj: obj, cfg: cfg, log: cfg.Logger}, nil
}

// Run consumes jobs until ctx ends.
func (p *Producer) Run(ctx context.Context) error {
	return bus.Consume(ctx, p.js, bus.ConsumerConfig{
		Stream: schemas.StreamJobs, Durable: "producer", Filter: schemas.SubjectJobs + ">",
		// A failed read is retried with growing delays (1s … 60s) for about
		// a quarter of an hour of database trouble before the job is
		// dead-lettered and its task failed.
		AckWait: bus.DefaultAckWait, MaxDeliver: 20,
		Concurrency: p.cfg.Concurrency, OnDeadLetter: p.onDeadLetter, Logger: p.log, DeadLetters: p.cfg.Metrics,
	}, p.cfg.Tracing.Handle("producer plan", p.handle))
}

func (p *Producer) handle(ctx context.Context, msg jetstream.Msg) error {
	job, err := schemas.DecodeJob(msg.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	if _, busy := p.planning.LoadOrStore(job.TaskID, struct{}{}); busy {
		return fmt.Errorf("task %s is still being planned by an earlier delivery", job.TaskID)
	}
	defer p.planning.Delete(job.TaskID)
	if md, err := msg.Metadata(); err == nil && md.NumDelivered == 1 {
		ctx = context.WithValue(ctx, firstDeliveryKey{}, true)
	}
	// bus.Consume keeps the message alive while the window is read.
	if err := p.Plan(ctx, job); err != nil {
		return err
	}
	return msg.DoubleAck(ctx)
}

// maxTaskHeader is the largest task description (EncodeTaskMeta) the
// producer sends in a header: NATS refuses headers past 64 KB, and a
// message it refuses would be retried for nothing.
const maxTaskHeader = 32 << 10

// verdict is a task that ends in the producer.
type verdict struct {
	status schemas.Status
	code   int
	msg    string
}

func (v *verdict) Error() string { return v.msg }

// Plan runs the producer's part of one job and publishes its batches, or
// its verdict when the task ends here. Errors returned are transient. The
// plan it stores goes with the task's context.
func (p *Producer) Plan(ctx context.Context, job schemas.Job) error {
	log := p.log.With("task_id", job.TaskID, "trigger", job.Trigger)
	meta := schemas.TaskMeta{
		TaskID: job.TaskID, Trigger: job.Trigger, Measurement: job.Args.Measurement, Target: job.Args.Field,
		Model: job.Args.Model, Output: job.Args.OutputMeasurement, OutputSchema: job.Args.OutputSchema, Features: job.Args.FeatureFields, Start: job.Start, End: job.End, DryRun: job.DryRun,
		Origin: job.Origin, Requested: job.Requested, SkipExisting: job.Args.SkipExisting, MaxRetries: job.Args.MaxRetries, RequestTimeout: job.Args.RequestTimeout, SealedKey: job.SealedKey,
		Quantiles: job.Args.Quantiles, LargeContext: job.Args.LargeContext,
	}
	resumed, err := p.resumePlan(ctx, job, log)
	if !resumed && err == nil {
		err = p.plan(ctx, job, &meta, log)
	}
	if ie, ok := tsdb.AsInputError(err); ok {
		// A permanent refusal (invalid bytes in a tag value, a column gone):
		// the task fails now, not after a quarter hour of redeliveries.
		err = &verdict{schemas.StatusFailed, http.StatusBadRequest, ie.Message}
	}
	var v *verdict
	if errors.As(err, &v) {
		// Problems joined by errors.Join are lines; the message travels as
		// one line, so keep them apart.
		v.msg = strings.ReplaceAll(v.msg, "\n", "; ")
		log.Info("task ends in the producer", "status", v.status, "reason", v.msg)
		return p.publishVerdict(ctx, meta, v, "verdict")
	}
	return err
}

// readWindow checks the table against the job's arguments and reads the
// job's window; meta gains the tag columns. release frees the window.
func (p *Producer) readWindow(ctx context.Context, job schemas.Job, meta *schemas.TaskMeta) (w window, truncated bool, release func(), err error) {
	a := job.Args
	table, err := p.db.Describe(ctx, a.Measurement)
	if errors.Is(err, tsdb.ErrNoTable) {
		return w, false, nil, &verdict{schemas.StatusFailed, http.StatusNotFound, fmt.Sprintf("measurement %q does not exist: create the table or fix the trigger's measurement argument", a.Measurement)}
	}
	if err != nil {
		return w, false, nil, err
	}
	if err := CheckSchema(table, a); err != nil {
		return w, false, nil, &verdict{schemas.StatusFailed, http.StatusBadRequest, err.Error()}
	}
	meta.TagColumns = table.Tags()
	// Refuse before the model is paid if the output table cannot be written.
	out := tsdb.Series{Measurement: a.Measurement, Target: a.Field, Model: a.Model, Table: a.OutputMeasurement,
		Schema: a.OutputSchema, TagColumns: meta.TagColumns, Quantiles: schemas.QuantileColumns(a.Quantiles)}
	if err := tsdb.CheckRegressed(ctx, p.db.Pool(), out); errors.Is(err, tsdb.ErrIncompatible) {
		return w, false, nil, &verdict{schemas.StatusFailed, http.StatusConflict, err.Error()}
	} else if err != nil {
		return w, false, nil, err
	}
	q := tsdb.WindowQuery{Measurement: a.Measurement, Target: a.Field, Features: a.FeatureFields,
		TagColumns: meta.TagColumns, Filter: a.Tags, Start: job.Start, End: job.End, Limit: a.MaxReadRows, LocalTime: table.LocalTime(),
		Decimal: table.Decimal()}
	readDone := p.cfg.Metrics.Time(metrics.StageProducerRead)
	win, err := p.db.ReadWindow(ctx, q)
	if err != nil {
		return w, false, nil, err
	}
	readDone()
	p.cfg.Metrics.AddRows(metrics.RowsRead, int(win.Record.NumRows()))
	return newWindow(win.Record, len(meta.TagColumns), len(a.FeatureFields)), win.Truncated, win.Release, nil
}

func (p *Producer) plan(ctx context.Context, job schemas.Job, meta *schemas.TaskMeta, log *slog.Logger) error {
	a := job.Args
	w, truncated, release, err := p.readWindow(ctx, job, meta)
	if err != nil {
		return err
	}
	defer release()
	meta.ReadRows, meta.ReadTruncated = w.rows(), truncated
	if truncated {
		log.Warn("read cut by max_read_rows; the oldest rows of the window were not read", "max_read_rows", a.MaxReadRows)
	}
	if len(a.GroupBy) > 0 {
		return p.planSeries(ctx, job, meta, w, log)
	}
	series, err := w.series(meta.TagColumns)
	if err != nil {
		return &verdict{schemas.StatusFailed, http.StatusBadRequest, err.Error()}
	}
	meta.Series = series
	examples, queries := w.split()
	queries, dup := w.distinctTimes(queries)
	if dup > 0 {
		log.Warn("rows to predict share a time: one prediction per series and time", "rows_dropped", dup)
	}
	if a.SkipExisting && len(queries) > 0 {
		existing, err := p.db.ExistingTimes(ctx, tsdb.Series{Measurement: a.Measurement, Target: a.Field,
			Table: a.OutputMeasurement, Schema: a.OutputSchema, TagColumns: meta.TagColumns, Tags: series}, job.Start, job.End)
		if err != nil {
			return err
		}
		queries, meta.SkippedExists = w.dropExisting(queries, existing)
		p.cfg.Metrics.AddRows(metrics.RowsSkippedExisting, meta.SkippedExists)
	}
	if len(queries) > a.MaxPredictRows {
		meta.DroppedQueries = len(queries) - a.MaxPredictRows
		queries = newest(queries, a.MaxPredictRows)
	}
	examples = newest(examples, a.MaxTrainRows)
	meta.ContextRows, meta.QueryRows = len(examples), len(queries)
	lacking := ""
	if len(examples) < a.MinHistory {
		lacking = w.lacking(a.FeatureFields)
	}
	if v := skipVerdict(len(examples), a.MinHistory, len(queries), meta.SkippedExists, lacking); v != nil {
		return v
	}
	ctxRec := w.contextRecord(a.FeatureFields, examples)
	body, err := schemas.EncodeRecord(ctxRec)
	ctxRec.Release()
	if err != nil {
		return err
	}
	// The digest keys the workers' and the engine's caches: tasks over the
	// same rows share their decoded and fitted contexts.
	meta.ContextDigest = schemas.ContextDigest(body)
	batches := cut(queries, a.PredictBatchSize)
	meta.Batches = len(batches)
	log.Info("task planned", "context_rows", meta.ContextRows, "query_rows", meta.QueryRows, "batches", meta.Batches,
		"skipped_existing", meta.SkippedExists, "read_rows", meta.ReadRows)
	hdr, err := schemas.EncodeTaskMeta(*meta)
	if err != nil {
		return err
	}
	if len(hdr) > maxTaskHeader {
		return &verdict{schemas.StatusFailed, http.StatusBadRequest, fmt.Sprintf("the task's description is %d bytes, over the %d a NATS header may carry: name fewer feature fields or tags, or send a shorter model-service key", len(hdr), maxTaskHeader)}
	}
	info, err := p.storeContext(ctx, meta.TaskID, body, hdr, encodePlan(w, batches))
	if err != nil {
		return err
	}
	meta.ContextNUID, meta.ContextChunks = info.NUID, int(info.Chunks)
	if hdr, err = schemas.EncodeTaskMeta(*meta); err != nil {
		return err
	}
	return p.publishBatches(ctx, *meta, hdr, w, batches)
}

// cut splits rows into batches of at most size.
func cut(rows []int, size int) [][]int {
	out := make([][]int, 0, (len(rows)+size-1)/size)
	for lo := 0; lo < len(rows); lo += size {
		out = append(out, rows[lo:min(lo+size, len(rows))])
	}
	return out
}

// publishVerdict sends a task's final word to the writer as a result with no
// batches.
// idSuffix names the verdict's message id (task id + ":" + idSuffix).
func (p *Producer) publishVerdict(ctx context.Context, meta schemas.TaskMeta, v *verdict, idSuffix string) error {
	if hdr, err := schemas.EncodeTaskMeta(meta); err == nil && len(hdr) > maxTaskHeader {
		// The verdict of a task too large to describe in a header: the
		// writer needs none of its features or series to record it.
		meta.Features, meta.Series, meta.SealedKey = nil, nil, ""
	}
	m, err := schemas.NewResultMsg(schemas.Result{Meta: meta, Batch: schemas.VerdictBatch, Status: v.status, Message: v.msg, Code: v.code})
	if err != nil {
		return err
	}
	p.cfg.Tracing.InjectMsg(ctx, m)
	_, err = p.js.PublishMsg(ctx, m, jetstream.WithMsgID(meta.TaskID+":"+idSuffix))
	return err
}
