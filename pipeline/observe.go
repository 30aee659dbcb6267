package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
)

// observe builds the process's metrics registry and its tracer provider:
// the registry with the watchers of what this process holds (the NATS
// connection, JetStream's consumers and streams, the database pool), the
// provider from cfg.Tracing or else from the environment (OTLP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, nothing otherwise).
func (p *Pipeline) observe(ctx context.Context, cfg Config, service string) error {
	p.metrics = metrics.New()
	if p.NC != nil {
		if err := p.metrics.WatchNATS(p.NC); err != nil {
			return err
		}
		consumers := []metrics.Consumer{{Stream: schemas.StreamJobs, Name: "producer"},
			{Stream: schemas.StreamBatches, Name: "worker"}, {Stream: schemas.StreamResults, Name: "writer"}}
		streams := []string{schemas.StreamJobs, schemas.StreamBatches, schemas.StreamResults, schemas.StreamDLQ}
		if err := p.metrics.WatchJetStream(p.JS, metrics.JetStreamConfig{Consumers: consumers, Streams: streams}); err != nil {
			return err
		}
	}
	if p.Pool != nil {
		if err := p.metrics.WatchDBPool(p.Pool); err != nil {
			return err
		}
	}
	p.tracing = cfg.Tracing
	if p.tracing == nil {
		tp, err := tracing.New(ctx, service)
		if err != nil {
			return err
		}
		p.tracing, p.ownTracing = tp, true
	}
	return nil
}

// closeTracing exports the spans still buffered, when this pipeline built
// the provider.
func (p *Pipeline) closeTracing() {
	if !p.ownTracing {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.tracing.Shutdown(ctx); err != nil {
		p.log.Warn("trace export at shutdown", "err", err)
	}
}

// Metrics is the process's metrics registry, served on /metrics.
func (p *Pipeline) Metrics() *metrics.Metrics { return p.metrics }

// serviceName is the traces' service name of a process running roles.
func serviceName(roles []string) string {
	return fmt.Sprintf("regressd-%s", strings.Join(roles, "-"))
}

// instrument counts and times the answers of an HTTP server, and lets a
// request's W3C traceparent parent the spans it starts (an engine call's
// task joins its caller's trace).
func (p *Pipeline) instrument(server string, h http.Handler) http.Handler {
	h = p.metrics.InstrumentHandler(server, h)
	if p.tracing == nil || p.tracing.Propagator == nil {
		return h
	}
	prop := p.tracing.Propagator
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			r = r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}
