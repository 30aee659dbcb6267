package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker/v2"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
)

// Config configures a Worker.
type Config struct {
	Predictor Predictor
	Sealer    *schemas.Sealer
	// NeedKey says the predictor uses the model-service key (a hosted
	// gateway); the built-in engine does not, and never opens it.
	NeedKey bool
	// Concurrency is the number of batches predicted at once. Default 2.
	Concurrency int
	// MaxDeliver bounds attempts at a batch of a task that sets no
	// max_retries; the last failure is written as a failed batch so the
	// task still completes. Default 8.
	MaxDeliver int
	// BreakerFailures consecutive transient failures open the breaker. Default 5.
	BreakerFailures uint32
	// BreakerCooldown is how long the breaker stays open. Default 15s.
	BreakerCooldown time.Duration
	// Instance names this worker on the status page (schemas.BucketStatus).
	// Default host-pid.
	Instance string
	// PredictorName says what Predictor is ("local" or "remote"), for the
	// status page. Optional.
	PredictorName string
	Logger        *slog.Logger
	// Metrics records rows predicted, gateway retries and dead letters;
	// nil records nothing.
	Metrics *metrics.Metrics
	// Tracing continues each batch's trace and carries it on in its
	// result; nil traces nothing.
	Tracing *tracing.Provider
}

// Worker predicts batches.
type Worker struct {
	js  jetstream.JetStream
	obj *bus.Objects
	cfg Config
	cb  *gobreaker.CircuitBreaker[*Detailed]
	log *slog.Logger

	metas    schemas.TaskMetas
	mu       sync.Mutex
	contexts map[string]*loadedContext

	// breakerChanged wakes reportStatus when the breaker changes state.
	breakerChanged chan struct{}
}

type loadedContext struct {
	once sync.Once
	x    [][]float64
	y    []float64
	err  error
}

// New binds the context store and builds the breaker.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Worker, error) {
	if cfg.Predictor == nil || cfg.Sealer == nil {
		return nil, errors.New("worker: predictor and sealer are required")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 2
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = 8
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = 5
	}
	if cfg.BreakerCooldown == 0 {
		cfg.BreakerCooldown = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Instance == "" {
		cfg.Instance = defaultInstance()
	}
	obj, err := bus.OpenObjects(ctx, js, schemas.StoreContext)
	if err != nil {
		return nil, err
	}
	w := &Worker{js: js, obj: obj, cfg: cfg, log: cfg.Logger, contexts: map[string]*loadedContext{}, breakerChanged: make(chan struct{}, 1)}
	w.cb = gobreaker.NewCircuitBreaker[*Detailed](gobreaker.Settings{
		Name:        "predictor",
		MaxRequests: 1,
		Timeout:     cfg.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.BreakerFailures },
		// A final error is the request's fault, not the predictor's health.
		IsSuccessful: func(err error) bool { return err == nil || IsFinal(err) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			cfg.Logger.Warn("circuit breaker", "from", from.String(), "to", to.String())
			select {
			case w.breakerChanged <- struct{}{}:
			default: // a wake-up is pending; it reads the newest state
			}
		},
	})
	return w, nil
}

// BreakerState is the breaker's state, for metrics and tests.
func (w *Worker) BreakerState() gobreaker.State { return w.cb.State() }

// Run consumes batches until ctx ends; while the breaker is open it pulls
// nothing. Meanwhile it publishes the breaker's state for the status page.
func (w *Worker) Run(ctx context.Context) error {
	sctx, stop := context.WithCancel(ctx)
	var status sync.WaitGroup
	status.Go(func() { w.reportStatus(sctx) })
	defer status.Wait()
	defer stop()
	return bus.Consume(ctx, w.js, bus.ConsumerConfig{
		Stream: schemas.StreamBatches, Durable: "worker", Filter: schemas.SubjectBatches + ">",
		// The worker itself turns a batch's last attempt (max_retries, or
		// MaxDeliver) into a failed batch; the two spare deliveries are for
		// crashes.
		AckWait: bus.DefaultAckWait, MaxDeliver: max(w.cfg.MaxDeliver, schemas.MaxRetriesLimit) + 2,
		// One delivery is one prediction: a gateway's request_timeout, or
		// the engine's work.
		MaxWork:      2 * time.Hour,
		Concurrency:  w.cfg.Concurrency,
		Gate:         func() bool { return w.cb.State() != gobreaker.StateOpen },
		OnDeadLetter: w.onDeadLetter, Logger: w.log, DeadLetters: w.cfg.Metrics,
	}, w.cfg.Tracing.Handle("worker predict", w.handle))
}

func (w *Worker) handle(ctx context.Context, msg jetstream.Msg) error {
	if schemas.IsPack(msg.Headers()) {
		return w.handlePack(ctx, msg)
	}
	meta, batchNo, err := w.metas.DecodeBatch(msg.Headers())
	if err != nil {
		return bus.Permanent(err)
	}
	rec, err := schemas.DecodeRecord(msg.Data(), schemas.QuerySchema(meta.Features))
	if err != nil {
		return bus.Permanent(err)
	}
	defer rec.Release()
	log := w.log.With("task_id", meta.TaskID, "batch", batchNo)

	// bus.Consume keeps the message alive (InProgress) while it is predicted.
	preds, err := w.predict(ctx, meta, rec)
	if err != nil && !IsFinal(err) && ctx.Err() == nil {
		var retry error
		if retry, err = w.retryOrFinal(ctx, msg, meta, err); retry != nil {
			return retry
		}
	}
	if err != nil {
		log.Error("batch failed", "err", err)
		if perr := w.publish(ctx, meta, batchNo, rec, nil, err.Error(), callerStatus(err)); perr != nil {
			return perr
		}
		return msg.Ack()
	}
	if err := w.publish(ctx, meta, batchNo, rec, preds, "", 0); err != nil {
		return err
	}
	w.cfg.Metrics.AddRows(metrics.RowsPredicted, predicted(preds.Values))
	log.Debug("batch predicted", "rows", rec.NumRows())
	// The result is stored: an ack lost on the way costs a second
	// prediction, whose result the ledger ignores, so it is not waited for.
	return msg.Ack()
}

// attempts is how many attempts a batch of the task gets: its max_retries,
// or MaxDeliver for a task that sets none.
// retryOrFinal decides a transient failure err of one delivery of msg:
// while the task's attempts last, it returns the retry to hand the bus
// (after a backoff); after the last, err made final. One delivery is one
// attempt (one gateway call), so max_retries bounds the calls a batch
// costs whichever worker makes them.
func (w *Worker) retryOrFinal(ctx context.Context, msg jetstream.Msg, meta schemas.TaskMeta, err error) (retry, final error) {
	wait, final := w.nextAttempt(ctx, delivery(msg), meta, err)
	if final != nil {
		return nil, final
	}
	return bus.RetryIn(err, wait), nil
}

// delivery is msg's delivery number, from 1.
func delivery(msg jetstream.Msg) uint64 {
	if md, _ := msg.Metadata(); md != nil {
		return md.NumDelivered
	}
	return 1
}

// nextAttempt decides a transient failure err of attempt number attempt:
// the wait before the next while the task's attempts last, else err made
// final.
func (w *Worker) nextAttempt(ctx context.Context, attempt uint64, meta schemas.TaskMeta, err error) (time.Duration, error) {
	attempts := w.attempts(meta)
	if attempt >= uint64(attempts) {
		return 0, Final(fmt.Errorf("gave up after %d attempts (max_retries=%d): %w", attempt, attempts, err))
	}
	if w.cfg.NeedKey {
		w.cfg.Metrics.GatewayRetry(gatewayOutcome(ctx, err))
	}
	return retryWait(attempt, err), nil
}

func (w *Worker) attempts(meta schemas.TaskMeta) int {
	if meta.MaxRetries > 0 {
		return min(meta.MaxRetries, schemas.MaxRetriesLimit)
	}
	return w.cfg.MaxDeliver
}

// maxRetryWait caps the wait before a batch's next attempt, Retry-After
// included, as the plugin caps its backoff.
const maxRetryWait = 30 * time.Second

// retryWait is the wait after a batch's n-th failed attempt: the gateway's
// Retry-After when it gave one, else 2^(n−1) s plus up to 1 s of jitter
// (so that batches failing together do not come back together), capped at
// maxRetryWait.
func retryWait(n uint64, err error) time.Duration {
	var he *gateway.HTTPError
	if errors.As(err, &he) && he.RetryAfter > 0 {
		return min(he.RetryAfter, maxRetryWait)
	}
	return min(bus.RetryDelay(n)+rand.N(time.Second), maxRetryWait)
}

func (w *Worker) predict(ctx context.Context, meta schemas.TaskMeta, rec arrow.RecordBatch) (*Detailed, error) {
	x, y, err := w.context(ctx, meta, len(meta.Features))
	if err != nil {
		return nil, err
	}
	return w.predictWith(ctx, meta, x, y, rec)
}

// predictWith predicts a batch's query rows rec from its task's context
// (x, y) through the breaker, and checks the answer's shape.
func (w *Worker) predictWith(ctx context.Context, meta schemas.TaskMeta, x [][]float64, y []float64, rec arrow.RecordBatch) (*Detailed, error) {
	var key string
	var err error
	if w.cfg.NeedKey {
		// A group_by run's series carry their run's sealed key: it is bound
		// to the run's task id.
		sealedFor := meta.TaskID
		if meta.Parent != "" {
			sealedFor = meta.Parent
		}
		if key, err = w.cfg.Sealer.Open(meta.SealedKey, sealedFor); err != nil {
			return nil, Final(fmt.Errorf("model-service key: %w (do all roles share REGRESSD_SECRET?)", err))
		}
	}
	xq := columnsToRows(rec, 1)
	req := Request{Model: meta.Model, ContextID: meta.ContextDigest, X: x, Y: y, Xq: xq, Key: key,
		Timeout: time.Duration(meta.RequestTimeout), Quantiles: meta.Quantiles, LargeContext: meta.LargeContext}
	call := func() (*Detailed, error) { return predictDetailed(ctx, w.cfg.Predictor, req) }
	preds, err := w.cb.Execute(call)
	for errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		// The breaker refused the call: hold the batch until it lets calls
		// through, rather than nak it and spend one of its deliveries on a
		// call never made. The consumer pulls nothing new meanwhile.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		preds, err = w.cb.Execute(call)
	}
	if err == nil && (len(preds.Values) != len(xq) || (meta.Quantiles != nil && len(preds.Quantiles) != len(xq))) {
		return nil, Final(fmt.Errorf("model returned %d predictions for %d rows", len(preds.Values), len(xq)))
	}
	if err == nil && allMissing(preds.Values) {
		return nil, Final(errors.New("model returned no prediction for any row"))
	}
	return preds, err
}

// context loads and decodes a task's context once per worker; tasks over
// the same rows (the same digest) share it.
func (w *Worker) context(ctx context.Context, meta schemas.TaskMeta, nFeatures int) ([][]float64, []float64, error) {
	digest := meta.ContextDigest
	w.mu.Lock()
	lc, ok := w.contexts[digest]
	if !ok {
		lc = &loadedContext{}
		if len(w.contexts) > 64 {
			w.contexts = map[string]*loadedContext{}
		}
		w.contexts[digest] = lc
	}
	w.mu.Unlock()
	lc.once.Do(func() {
		body, err := w.readContext(ctx, meta)
		if bus.IsNotFound(err) {
			err = Final(fmt.Errorf("context %s expired from the object store; run the task again", digest[:12]))
		}
		if err != nil {
			lc.err = err
			return
		}
		if lc.x, lc.y, lc.err = decodeContext(body, nil, nFeatures); lc.err != nil {
			lc.err = Final(fmt.Errorf("context %s is malformed: %v", digest[:12], lc.err))
			return
		}
		w.log.Debug("context loaded", "task_id", meta.TaskID, "rows", len(lc.y), "bytes", len(body), "chunks", meta.ContextChunks)
	})
	if lc.err != nil {
		w.mu.Lock()
		if !IsFinal(lc.err) {
			delete(w.contexts, digest) // transient: let the next batch retry
		}
		w.mu.Unlock()
	}
	return lc.x, lc.y, lc.err
}

// decodeContext decodes an encoded context (ContextSchema: the features,
// then the target) into rows and targets.
// want, when not nil, is the schema it must have.
func decodeContext(body []byte, want *arrow.Schema, nFeatures int) ([][]float64, []float64, error) {
	rec, err := schemas.DecodeRecord(body, want)
	if err != nil {
		return nil, nil, err
	}
	defer rec.Release()
	if int(rec.NumCols()) != nFeatures+1 {
		return nil, nil, fmt.Errorf("%d columns for %d features and a target", rec.NumCols(), nFeatures)
	}
	y, ok := rec.Column(nFeatures).(*array.Float64)
	if !ok {
		return nil, nil, fmt.Errorf("target column of type %s", rec.Column(nFeatures).DataType())
	}
	x := columnsToRows(rec, 0)
	for i := range x {
		x[i] = x[i][:nFeatures]
	}
	return x, append([]float64(nil), y.Float64Values()...), nil
}

// readContext reads a task's stored context: a context of one chunk by its
// chunk's subject (checked against its digest), any other through the
// object store.
func (w *Worker) readContext(ctx context.Context, meta schemas.TaskMeta) ([]byte, error) {
	if meta.ContextChunks == 1 && meta.ContextNUID != "" {
		body, err := w.obj.GetChunk(ctx, meta.ContextNUID)
		if err != nil {
			return nil, err
		}
		if schemas.ContextDigest(body) != meta.ContextDigest {
			return nil, Final(fmt.Errorf("context %s does not match its digest", meta.ContextDigest[:12]))
		}
		return body, nil
	}
	res, err := w.obj.Get(ctx, schemas.ContextObject(meta.TaskID))
	if err != nil {
		return nil, err
	}
	defer res.Close()
	return io.ReadAll(res)
}

// columnsToRows turns float64 columns from index `from` into rows.
func columnsToRows(rec arrow.RecordBatch, from int) [][]float64 {
	n, k := int(rec.NumRows()), int(rec.NumCols())-from
	flat := make([]float64, n*k)
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = flat[i*k : (i+1)*k : (i+1)*k]
	}
	for j := 0; j < k; j++ {
		col := rec.Column(from + j).(*array.Float64)
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				rows[i][j] = math.NaN()
			} else {
				rows[i][j] = col.Value(i)
			}
		}
	}
	return rows
}

// callerStatus is the HTTP status of a gateway's refusal that is the
// caller's to fix (a refused service key, an unknown model, input the
// gateway rejects), so that a task failing with it answers that status; 0
// for anything else (the model side's trouble).
func callerStatus(err error) int {
	if s := refusedStatus(err); s != 0 {
		return s
	}
	var he *gateway.HTTPError
	if errors.As(err, &he) && he.Status >= 400 && he.Status < 500 && !gateway.IsTransient(err) {
		return he.Status
	}
	return 0
}

// publish sends a batch's predictions (or its failure, with the status a
// caller should see when not 0) to the writer.
func (w *Worker) publish(ctx context.Context, meta schemas.TaskMeta, batchNo int, rec arrow.RecordBatch, preds *Detailed, failure string, status int) error {
	r := schemas.Result{Meta: meta, Batch: batchNo, Status: schemas.StatusOK, Rows: int(rec.NumRows())}
	if failure != "" {
		r.Status, r.Message, r.Code = schemas.StatusFailed, failure, status
	} else {
		out := resultRecord(rec.Column(0).(*array.Timestamp), preds, meta.Quantiles)
		r.Outside = preds.Outside
		body, err := schemas.EncodeRecord(out)
		out.Release()
		if err != nil {
			return err
		}
		r.Body = body
	}
	m, err := schemas.NewResultMsg(r)
	if err != nil {
		return err
	}
	w.cfg.Tracing.InjectMsg(ctx, m)
	_, err = w.js.PublishMsg(ctx, m, jetstream.WithMsgID(schemas.BatchMsgID(meta.TaskID, batchNo)))
	return err
}

func allMissing(v []float64) bool {
	for _, x := range v {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return false
		}
	}
	return len(v) > 0
}
