// Package tracing owns regressd's OpenTelemetry traces: a tracer provider
// that exports by OTLP (HTTP/protobuf) when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and records nothing otherwise,
// and the W3C trace context carried in NATS message headers, so one task's
// spans join into one trace across the scheduler, producer, worker and
// writer.
//
// Nothing here is global: a process builds one Provider and passes it (or
// its Tracer) to its roles; otel's global provider is left alone.
package tracing
