package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// GatewayCall counts one attempt at a hosted /predict gateway by outcome.
func (m *Metrics) GatewayCall(o Outcome) {
	if m == nil {
		return
	}
	m.gatewayCalls.WithLabelValues(bound(string(o), outcomes())).Inc()
}

// GatewayRetry counts an attempt that is retried, by the outcome that made
// it retry (rate_limited, server_error, cold_start, transport).
func (m *Metrics) GatewayRetry(o Outcome) {
	if m == nil {
		return
	}
	m.gatewayRetries.WithLabelValues(bound(string(o), outcomes())).Inc()
}

// InstrumentHandler counts h's answers by status code and times them,
// under server (ServerAPI or ServerGateway).
func (m *Metrics) InstrumentHandler(server string, h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	l := prometheus.Labels{"server": bound(server, servers())}
	h = promhttp.InstrumentHandlerCounter(m.httpRequests.MustCurryWith(l), h)
	return promhttp.InstrumentHandlerDuration(m.httpDuration.MustCurryWith(l), h)
}

// WatchGatewayRefusals serves regressd_gateway_refused_total{reason} from
// refused (the /predict server's Refusals), read at every scrape.
func (m *Metrics) WatchGatewayRefusals(refused func() map[string]int64) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(refusalCollector{
		desc:    prometheus.NewDesc(NameGatewayRefused, "Requests the /predict gateway refused, or its callers abandoned, by reason.", []string{"reason"}, nil),
		refused: refused,
	})
}

type refusalCollector struct {
	desc    *prometheus.Desc
	refused func() map[string]int64
}

func (c refusalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c refusalCollector) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range c.refused() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), reason)
	}
}
