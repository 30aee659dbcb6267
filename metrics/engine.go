package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// EngineCall counts an engine call (a fit or a prediction) as in flight
// until what it returns is called.
func (m *Metrics) EngineCall() (done func()) {
	if m == nil {
		return func() {}
	}
	m.engineInflight.Inc()
	return m.engineInflight.Dec
}

// ObserveRung records the KV-cache rung an engine call used (the memory
// report's rung: no_cache, resident_bf16, …, plain_loop).
func (m *Metrics) ObserveRung(rung string) {
	if m == nil {
		return
	}
	r := bound(rung, rungs())
	m.engineRungCalls.WithLabelValues(r).Inc()
	for _, v := range rungs() {
		if v != r {
			m.engineRung.WithLabelValues(v).Set(0)
		}
	}
	if r != Other {
		m.engineRung.DeleteLabelValues(Other)
	}
	m.engineRung.WithLabelValues(r).Set(1)
}

// WatchBreaker serves regressd_breaker_state from state, read at every
// scrape: state returns the breaker's state as gobreaker spells it
// ("closed", "half-open", "open"). A process registers one breaker.
func (m *Metrics) WatchBreaker(state func() string) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(breakerCollector{
		desc:  prometheus.NewDesc(NameBreakerState, "1 for the worker's circuit breaker's current state (closed, half_open, open), 0 for the others.", []string{"state"}, nil),
		state: state,
	})
}

type breakerCollector struct {
	desc  *prometheus.Desc
	state func() string
}

func (c breakerCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c breakerCollector) Collect(ch chan<- prometheus.Metric) {
	now := strings.ReplaceAll(c.state(), "-", "_")
	for _, s := range breakerStates() {
		v := 0.0
		if s == now {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s)
	}
}
