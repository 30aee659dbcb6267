package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// Handle continues a delivered message's trace in a span that names its
// task and records the handler's error; with export off it still hands
// the received trace context to the handler, so traces pass through.
func TestHandle(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)
	on := WithProvider(tp)
	pctx, pub := on.Start(ctx, "regressd.task")
	msg := &nats.Msg{Subject: "regress.jobs.t", Data: []byte("{}"), Header: nats.Header{}}
	msg.Header.Set(schemas.HeaderTask, `{"task_id":"t_42"}`)
	on.InjectMsg(pctx, msg)
	if _, err := srv.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	pub.End()
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, schemas.StreamJobs, jetstream.ConsumerConfig{Durable: "h", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var seen trace.SpanContext
	failing := on.Handle("producer plan", func(ctx context.Context, _ jetstream.Msg) error {
		seen = trace.SpanContextFromContext(ctx)
		return errors.New("window read failed")
	})
	if err := failing(ctx, got); err == nil {
		t.Fatal("the handler's error was lost")
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	s := spans[1]
	if s.Name != "producer plan" || s.Parent.SpanID() != spans[0].SpanContext.SpanID() || !s.SpanContext.Equal(seen) {
		t.Fatalf("span %q parent %s, handler saw %s: want the publisher's child, seen by the handler", s.Name, s.Parent.SpanID(), seen.SpanID())
	}
	if s.Status.Code != codes.Error || len(s.Events) == 0 {
		t.Errorf("status %v, %d events: the error is not recorded", s.Status, len(s.Events))
	}
	task := false
	for _, a := range s.Attributes {
		task = task || (a.Key == AttrTaskID && a.Value.AsString() == "t_42")
	}
	if !task {
		t.Errorf("attributes %v do not name the task", s.Attributes)
	}

	off, err := New(ctx, "test") // no endpoint: export off
	if err != nil {
		t.Fatal(err)
	}
	var passed trace.SpanContext
	off.Handle("x", func(ctx context.Context, _ jetstream.Msg) error {
		passed = trace.SpanContextFromContext(ctx)
		return nil
	})(ctx, got)
	if passed.TraceID() != spans[0].SpanContext.TraceID() {
		t.Errorf("with export off the handler got trace %s, want the message's %s", passed.TraceID(), spans[0].SpanContext.TraceID())
	}
	if len(exp.GetSpans()) != 2 {
		t.Error("export off recorded a span")
	}
}
