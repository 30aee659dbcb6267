package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider is a process's tracer provider and the propagator its messages
// carry the trace context with.
type Provider struct {
	trace.TracerProvider
	// Propagator injects and extracts W3C traceparent/tracestate and baggage.
	Propagator propagation.TextMapPropagator
	// Enabled says spans are exported (an OTLP endpoint is configured).
	Enabled  bool
	shutdown func(context.Context) error
}

// Endpoint returns the OTLP endpoint the environment configures for
// traces, empty when none (tracing off).
func Endpoint() string {
	if e := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
}

// New builds the provider for service (e.g. "regressd-worker";
// OTEL_SERVICE_NAME overrides it). With no OTLP endpoint in the
// environment, or with OTEL_SDK_DISABLED=true, it records nothing and
// costs next to nothing. The exporter reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, TLS) itself; only the http/protobuf
// protocol is built in, so OTEL_EXPORTER_OTLP_PROTOCOL=grpc is refused.
func New(ctx context.Context, service string) (*Provider, error) {
	p := &Provider{
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		shutdown:   func(context.Context) error { return nil },
	}
	if Endpoint() == "" || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		p.TracerProvider = noop.NewTracerProvider()
		return p, nil
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if proto := os.Getenv(v); proto != "" && proto != "http/protobuf" {
			return nil, fmt.Errorf("%s=%s: regressd exports traces by OTLP over http/protobuf only (a collector's port 4318)", v, proto)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err == nil {
		// The environment's service name and attributes win over ours.
		res, err = resource.Merge(res, resource.Environment())
	}
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	p.TracerProvider, p.Enabled, p.shutdown = tp, true, tp.Shutdown
	return p, nil
}

// Shutdown exports the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}
