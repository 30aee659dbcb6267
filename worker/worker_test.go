package worker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixture is a worker running on a real JetStream, with one task's context
// stored as the producer stores it.
type fixture struct {
	t    *testing.T
	srv  *bustest.Server
	meta schemas.TaskMeta
	w    *Worker
}

// startWorker stores a context (y = 2·x over x = 1…n) and runs a worker
// with pred until the test ends.
func startWorker(t *testing.T, pred Predictor, cfg Config) *fixture {
	t.Helper()
	srv := bustest.New(t)
	ctx := context.Background()
	features := []string{"x"}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ContextSchema(features))
	for i := 1; i <= 10; i++ {
		b.Field(0).(*array.Float64Builder).Append(float64(i))
		b.Field(1).(*array.Float64Builder).Append(2 * float64(i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	body, err := schemas.EncodeRecord(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	meta := schemas.TaskMeta{TaskID: "t_worker", Trigger: "wt", Measurement: "wt", Target: "y", Model: BenchModel,
		Features: features, Batches: 2, Start: t0, End: t0.Add(time.Hour), ContextDigest: schemas.ContextDigest(body),
		ContextRows: 10, RequestTimeout: schemas.Duration(time.Minute)}
	obj, err := bus.OpenObjects(ctx, srv.JS, schemas.StoreContext)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.Put(ctx, jetstream.ObjectMeta{Name: schemas.ContextObject(meta.TaskID)}, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	sealer, _ := schemas.NewSealer([]byte("worker-test-secret-0123"))
	cfg.Predictor, cfg.Sealer = pred, sealer
	w, err := New(ctx, srv.JS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Run(t, ctx, w.Run)
	return &fixture{t: t, srv: srv, meta: meta, w: w}
}

// publishBatch publishes batch no of the task with query rows xs.
func (f *fixture) publishBatch(no int, xs ...float64) {
	f.t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.QuerySchema(f.meta.Features))
	for i, x := range xs {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Minute).UnixMicro()))
		b.Field(1).(*array.Float64Builder).Append(x)
	}
	rec := b.NewRecordBatch()
	b.Release()
	body, err := schemas.EncodeRecord(rec)
	rec.Release()
	if err != nil {
		f.t.Fatal(err)
	}
	hdr, _ := schemas.EncodeTaskMeta(f.meta)
	if _, err := f.srv.JS.PublishMsg(context.Background(), schemas.NewBatchMsg(f.meta.Trigger, hdr, no, body)); err != nil {
		f.t.Fatal(err)
	}
}

// nextResult waits for the next result the worker publishes.
func (f *fixture) nextResult(cons jetstream.Consumer) (schemas.Result, []float64) {
	f.t.Helper()
	msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
	if err != nil {
		f.t.Fatalf("no result: %v", err)
	}
	msg.Ack()
	var metas schemas.TaskMetas
	r, err := metas.DecodeResult(msg.Headers())
	if err != nil {
		f.t.Fatalf("result: %v", err)
	}
	var vals []float64
	if r.Status == schemas.StatusOK {
		rec, err := schemas.DecodeRecord(msg.Data(), schemas.ResultSchema)
		if err != nil {
			f.t.Fatal(err)
		}
		vals = append(vals, rec.Column(1).(*array.Float64).Float64Values()...)
		rec.Release()
	}
	return r, vals
}

func (f *fixture) results() jetstream.Consumer {
	f.t.Helper()
	cons, err := f.srv.JS.CreateOrUpdateConsumer(context.Background(), schemas.StreamResults,
		jetstream.ConsumerConfig{Durable: "test", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		f.t.Fatal(err)
	}
	return cons
}

// A batch is predicted from its task's stored context and its result goes
// to the writer with a value per row and no key.
func TestBatchIsPredictedFromItsContext(t *testing.T) {
	f := startWorker(t, NewBenchPredictor(), Config{})
	cons := f.results()
	f.publishBatch(1, 3, 4, 5)
	r, vals := f.nextResult(cons)
	if r.Status != schemas.StatusOK || r.Batch != 1 || r.Rows != 3 || r.Meta.TaskID != f.meta.TaskID || r.Meta.SealedKey != "" {
		t.Fatalf("result %+v", r)
	}
	// The trivial predictor answers the context's mean target: 11.
	if len(vals) != 3 || vals[0] != 11 || vals[2] != 11 {
		t.Fatalf("values %v, want 3 × 11", vals)
	}
}

// failing is a predictor that fails: for good (Final) or for now.
type failing struct {
	final bool
	calls chan struct{}
}

func (p *failing) Predict(ctx context.Context, req Request) ([]float64, error) {
	p.calls <- struct{}{}
	if p.final {
		return nil, Final(errors.New("model refuses this context"))
	}
	return nil, errors.New("model service unavailable")
}

// A failure retrying cannot fix fails the batch at once: its result says
// why, and the task goes on to the writer.
func TestFinalErrorFailsTheBatch(t *testing.T) {
	p := &failing{final: true, calls: make(chan struct{}, 10)}
	f := startWorker(t, p, Config{})
	cons := f.results()
	f.publishBatch(0, 1)
	r, _ := f.nextResult(cons)
	if r.Status != schemas.StatusFailed || !strings.Contains(r.Message, "model refuses this context") || r.Rows != 1 {
		t.Fatalf("result %+v", r)
	}
	if len(p.calls) != 1 {
		t.Fatalf("%d calls, want 1", len(p.calls))
	}
}

// Transient failures are retried; consecutive ones open the breaker, and
// while it is open the worker calls the predictor no more.
func TestTransientFailuresOpenTheBreaker(t *testing.T) {
	t.Setenv(bus.EnvAckWait, "1s")
	p := &failing{calls: make(chan struct{}, 100)}
	f := startWorker(t, p, Config{BreakerFailures: 2, BreakerCooldown: time.Hour, MaxDeliver: 8})
	f.publishBatch(0, 1)
	for range 2 {
		select {
		case <-p.calls:
		case <-time.After(30 * time.Second):
			t.Fatal("the failing batch was not retried")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.w.BreakerState().String() != "open" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if s := f.w.BreakerState().String(); s != "open" {
		t.Fatalf("breaker %s after 2 failures, want open", s)
	}
	f.publishBatch(1, 2)
	time.Sleep(3 * time.Second)
	if n := len(p.calls); n != 0 {
		t.Fatalf("%d calls while the breaker is open", n)
	}
}

// A batch whose header names no task cannot be predicted: it goes to the
// dead-letter queue with the reason.
func TestUnreadableBatchIsDeadLettered(t *testing.T) {
	f := startWorker(t, NewBenchPredictor(), Config{})
	f.meta.Batches = 1
	f.publishBatch(5, 1) // batch 5 of a task of 1
	q, err := bus.OpenDLQ(context.Background(), f.srv.JS)
	if err != nil {
		t.Fatal(err)
	}
	var entries []bus.DeadLetterEntry
	for deadline := time.Now().Add(15 * time.Second); len(entries) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		entries, _ = q.List(context.Background(), schemas.SubjectDLQ+">", nil)
	}
	if len(entries) != 1 || !strings.Contains(entries[0].Reason, `batch number "5" out of range`) || entries[0].TaskID != f.meta.TaskID {
		t.Fatalf("dead letters %+v", entries)
	}
}

// The built-in engine stops at the task's request_timeout, as a hosted
// gateway's call would: the error is the context's, not final, so the
// batch is tried again; a later batch with time enough fits and predicts.
func TestLocalStopsAtTheRequestTimeout(t *testing.T) {
	var X [][]float64
	var y []float64
	for i := range 400 {
		x := float64(i) / 40
		X, y = append(X, []float64{x, x * x}), append(y, 3*x-x*x)
	}
	l := NewLocal(4)
	req := Request{Model: "regressd/model-4l", ContextID: "c1", X: X, Y: y, Xq: [][]float64{{1, 1}, {2, 4}}, Timeout: time.Microsecond}
	_, err := l.Predict(context.Background(), req)
	if err == nil || IsFinal(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("predict past its timeout: %v, want the deadline's error, not final", err)
	}
	req.Timeout = time.Minute
	preds, err := l.Predict(context.Background(), req)
	if err != nil || len(preds) != 2 {
		t.Fatalf("predict in time: %v %v", preds, err)
	}
}
