package tracing

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/regressd/regressd/schemas"
)

// InstrumentationName names the tracer regressd's spans come from.
const InstrumentationName = "github.com/regressd/regressd"

// Attribute keys regressd's spans carry (bounded values only on metrics;
// a trace may name its task).
const (
	AttrTaskID  = attribute.Key("regressd.task_id")
	AttrTrigger = attribute.Key("regressd.trigger")
	AttrOrigin  = attribute.Key("regressd.origin")
)

// WithProvider wraps an SDK or test tracer provider (an in-memory
// exporter's, say) as a Provider with the W3C propagator; its Shutdown is
// the caller's.
func WithProvider(tp trace.TracerProvider) *Provider {
	return &Provider{
		TracerProvider: tp,
		Propagator:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		Enabled:        true,
		shutdown:       func(context.Context) error { return nil },
	}
}

// Start starts a span named name as a child of ctx's span (or a root when
// ctx has none). A nil Provider starts a span that records nothing, so a
// role given no provider still runs.
func (p *Provider) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if p == nil || p.TracerProvider == nil {
		return noop.NewTracerProvider().Tracer(InstrumentationName).Start(ctx, name, opts...)
	}
	return p.Tracer(InstrumentationName).Start(ctx, name, opts...)
}

// InjectMsg writes ctx's trace context into msg's headers (traceparent);
// a nil Provider writes nothing.
func (p *Provider) InjectMsg(ctx context.Context, msg *nats.Msg) {
	if p == nil || p.Propagator == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	Inject(ctx, p.Propagator, msg)
}

// ExtractMsg returns ctx carrying the trace context of a received
// message's headers; a nil Provider returns ctx.
func (p *Provider) ExtractMsg(ctx context.Context, h nats.Header) context.Context {
	if p == nil || p.Propagator == nil {
		return ctx
	}
	return Extract(ctx, p.Propagator, h)
}

// Handle wraps a consumer's message handler in a span named name: the
// span continues the trace the message's headers carry, names the
// message's task, and records the error the handler returns (a retry or a
// dead letter). Without export (Enabled false) it only carries the
// received trace context on, so a process that exports nothing still
// passes its callers' traces through.
func (p *Provider) Handle(name string, h func(context.Context, jetstream.Msg) error) func(context.Context, jetstream.Msg) error {
	if p == nil {
		return h
	}
	if !p.Enabled {
		return func(ctx context.Context, msg jetstream.Msg) error { return h(p.ExtractMsg(ctx, msg.Headers()), msg) }
	}
	return func(ctx context.Context, msg jetstream.Msg) error {
		ctx, span := p.Start(p.ExtractMsg(ctx, msg.Headers()), name, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(AttrTaskID.String(schemas.TaskIDOf(msg.Headers()))))
		defer span.End()
		err := h(ctx, msg)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}
}
