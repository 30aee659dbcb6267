package tracing

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier carries a trace context in NATS message headers
// (traceparent, tracestate, baggage), which JetStream stores with the
// message and delivers with it.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the value of key.
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set sets key to value.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// Inject writes ctx's trace context into msg's headers, creating them when
// msg has none. Headers msg already has are kept.
func Inject(ctx context.Context, p propagation.TextMapPropagator, msg *nats.Msg) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	p.Inject(ctx, HeaderCarrier(msg.Header))
}

// Extract returns ctx carrying the trace context in h, the headers of a
// received message; spans started from it continue the sender's trace.
func Extract(ctx context.Context, p propagation.TextMapPropagator, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return p.Extract(ctx, HeaderCarrier(h))
}
