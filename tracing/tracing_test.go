package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/regressd/regressd/bus/bustest"
)

// A span context injected into a message's headers comes out of a real
// JetStream round trip (stored, then delivered to a pull consumer), and the
// span started from it joins the sender's trace as its child.
func TestTraceContextSurvivesJetStream(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)
	p, err := New(ctx, "test") // no endpoint: only its propagator is used
	if err != nil {
		t.Fatal(err)
	}
	tracer := tp.Tracer("regressd/test")

	pctx, pub := tracer.Start(ctx, "scheduler publish job", trace.WithSpanKind(trace.SpanKindProducer))
	msg := &nats.Msg{Subject: "regress.jobs.weather", Data: []byte("{}"), Header: nats.Header{"Regressd-Schema": {"1"}}}
	Inject(pctx, p.Propagator, msg)
	if _, err := srv.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	pub.End()

	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, "REGRESS_JOBS", jetstream.ConsumerConfig{Durable: "producer", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Headers().Get("Regressd-Schema"); v != "1" {
		t.Errorf("the message's own header is %q after injecting, want 1", v)
	}
	if got.Headers().Get("traceparent") == "" {
		t.Fatalf("delivered headers %v carry no traceparent", got.Headers())
	}
	cctx := Extract(ctx, p.Propagator, got.Headers())
	_, sub := tracer.Start(cctx, "producer read window", trace.WithSpanKind(trace.SpanKindConsumer))
	sub.End()
	got.Ack()

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans exported, want 2", len(spans))
	}
	parent, child := spans[0], spans[1]
	if child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Fatalf("consumer span in trace %s, publisher's %s", child.SpanContext.TraceID(), parent.SpanContext.TraceID())
	}
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || !child.Parent.IsRemote() {
		t.Fatalf("consumer span's parent %s (remote %v), want the publisher's %s, remote",
			child.Parent.SpanID(), child.Parent.IsRemote(), parent.SpanContext.SpanID())
	}
}

// A message with no trace context starts a trace of its own.
func TestExtractWithoutContext(t *testing.T) {
	p, err := New(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []nats.Header{nil, {}, {"traceparent": {"garbage"}}} {
		if sc := trace.SpanContextFromContext(Extract(context.Background(), p.Propagator, h)); sc.IsValid() {
			t.Errorf("headers %v gave a span context %v", h, sc)
		}
	}
}

func TestOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	p, err := New(context.Background(), "regressd-test")
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled {
		t.Fatal("tracing enabled with no endpoint")
	}
	ctx, span := p.Tracer("t").Start(context.Background(), "x")
	defer span.End()
	if span.IsRecording() {
		t.Fatal("a span records with tracing off")
	}
	msg := &nats.Msg{Subject: "x"}
	Inject(ctx, p.Propagator, msg)
	if v := msg.Header.Get("traceparent"); v != "" {
		t.Fatalf("tracing off injected traceparent %q", v)
	}
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach the endpoint as OTLP
// over HTTP. The test server stands for an OpenTelemetry collector.
func TestExportsByOTLP(t *testing.T) {
	var mu sync.Mutex
	var reqs []*coltracepb.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		reqs = append(reqs, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	ctx := context.Background()
	p, err := New(ctx, "regressd-worker")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled {
		t.Fatal("tracing off with an endpoint set")
	}
	_, span := p.Tracer("regressd/worker").Start(ctx, "worker predict batch")
	span.End()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var names, services []string
	for _, r := range reqs {
		for _, rs := range r.GetResourceSpans() {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					services = append(services, a.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}
	if strings.Join(names, ",") != "worker predict batch" || strings.Join(services, ",") != "regressd-worker" {
		t.Fatalf("collector got spans %v of services %v, want [worker predict batch] of [regressd-worker]", names, services)
	}
}

func TestGRPCProtocolRefused(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, err := New(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("err = %v, want a refusal naming http/protobuf", err)
	}
}
