package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// stageBuckets are the stage histograms' buckets, in seconds: a stage runs
// from a millisecond (a small commit) to minutes (a large fit on the CPU).
func stageBuckets() []float64 {
	return []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25, 60, 150, 300, 600}
}

// taskBuckets are the task histogram's, from a fraction of a second to an
// hour's backfill.
func taskBuckets() []float64 {
	return []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
}

// Metrics is one process's registry and the metrics its roles record.
// Methods are safe for concurrent use; on a nil *Metrics they do nothing.
type Metrics struct {
	reg *prometheus.Registry

	taskDuration  prometheus.Histogram
	stageDuration *prometheus.HistogramVec
	tasks         *prometheus.CounterVec

	rowsRead, rowsPredicted, rowsWritten, rowsSkipped prometheus.Counter

	gatewayCalls   *prometheus.CounterVec
	gatewayRetries *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec

	engineInflight  prometheus.Gauge
	engineRung      *prometheus.GaugeVec
	engineRungCalls *prometheus.CounterVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	scheduleTicks   prometheus.Counter
	scheduleSkipped prometheus.Counter
	scheduleSuccess *prometheus.GaugeVec
	schedulePeriod  *prometheus.GaugeVec
	sched           schedules
}

// New makes a registry with the Go and process collectors and every
// pipeline metric. Labelled series are created at zero for every value of
// their set, so rates and ratios are defined before the first event.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	m := &Metrics{
		reg: reg,
		taskDuration: f.histogram(prometheus.HistogramOpts{Name: NameTaskDuration,
			Help: "Time from a task's job being published to the task settling, in seconds.", Buckets: taskBuckets()}),
		stageDuration: f.histogramVec(prometheus.HistogramOpts{Name: NameStageDuration,
			Help: "Time one stage of a task took, in seconds: producer_read, engine_fit, engine_predict, writer_commit.", Buckets: stageBuckets()},
			"stage", stages()),
		tasks: f.counterVec(NameTasks, "Tasks settled, by final status.", "status", taskStatuses()),

		rowsRead:      f.counter(NameRowsRead, "Rows the producer read from measurement windows."),
		rowsPredicted: f.counter(NameRowsPredicted, "Rows the worker's predictor returned a value for."),
		rowsWritten:   f.counter(NameRowsWritten, "Predictions the writer committed to <measurement>_regressed."),
		rowsSkipped:   f.counter(NameRowsSkippedExisting, "Rows not predicted or not written because a prediction existed (skip_existing)."),

		gatewayCalls:   f.counterVec(NameGatewayCalls, "Attempts at calling a hosted /predict gateway, by outcome.", "outcome", outcomes()),
		gatewayRetries: f.counterVec(NameGatewayRetries, "Gateway attempts retried, by the outcome that caused the retry.", "outcome", outcomes()),
		deadLetters: f.counterVec2(NameDeadLetters, "Messages copied to the dead-letter queue, by origin stream and reason.",
			"stream", workStreams(), "reason", reasons()),

		engineInflight:  f.gauge(NameEngineInflight, "Engine calls (fits and predictions) running now."),
		engineRung:      f.gaugeVec(NameEngineRung, "1 for the KV-cache rung the last engine call used, 0 for the others.", "rung", rungs()),
		engineRungCalls: f.counterVec(NameEngineRungCalls, "Engine calls, by the KV-cache rung they used.", "rung", rungs()),

		httpRequests: f.counterVec2(NameHTTPRequests, "HTTP requests answered, by server (api, gateway) and status code.",
			"server", servers(), "code", nil),
		httpDuration: f.histogramVec(prometheus.HistogramOpts{Name: NameHTTPDuration,
			Help: "Time to answer an HTTP request, by server (api, gateway), in seconds.", Buckets: stageBuckets()},
			"server", servers()),

		scheduleTicks:   f.counter(NameScheduleTicks, "Schedule ticks fired (jobs published by cron and every: triggers)."),
		scheduleSkipped: f.counter(NameScheduleSkipped, "Schedule ticks skipped because the trigger's previous run was still under way."),
		scheduleSuccess: f.gaugeVec(NameScheduleSuccess, "Unix time of a scheduled trigger's last successful run; the time its schedule was loaded until one succeeds.", "trigger", nil),
		schedulePeriod:  f.gaugeVec(NameSchedulePeriod, "Seconds between two runs of a scheduled trigger.", "trigger", nil),
	}
	m.sched.lastOK = map[string]time.Time{}
	return m
}

// Registry is the process's registry, for collectors a caller adds.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus' text and OpenMetrics formats.
// A collector that fails is reported in the scrape's errors and the rest is
// still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry: m.reg, ErrorHandling: promhttp.ContinueOnError, EnableOpenMetrics: true,
	})
}

// factory registers what it makes on one registry and creates the series of
// every label value given up front.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(opts prometheus.HistogramOpts) prometheus.Histogram {
	h := prometheus.NewHistogram(opts)
	f.reg.MustRegister(h)
	return h
}

func (f factory) counterVec(name, help, label string, values []string) *prometheus.CounterVec {
	return f.counterVec2(name, help, label, values, "", nil)
}

// counterVec2 makes a counter with one or two labels; the series of every
// pair of values given are created (none for a label given no values).
func (f factory) counterVec2(name, help, l1 string, v1 []string, l2 string, v2 []string) *prometheus.CounterVec {
	labels := []string{l1}
	if l2 != "" {
		labels = append(labels, l2)
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	for _, a := range v1 {
		if l2 == "" {
			c.WithLabelValues(a)
			continue
		}
		for _, b := range v2 {
			c.WithLabelValues(a, b)
		}
	}
	return c
}

func (f factory) gaugeVec(name, help, label string, values []string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	f.reg.MustRegister(g)
	for _, v := range values {
		g.WithLabelValues(v)
	}
	return g
}

func (f factory) histogramVec(opts prometheus.HistogramOpts, label string, values []string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(opts, []string{label})
	f.reg.MustRegister(h)
	for _, v := range values {
		h.WithLabelValues(v)
	}
	return h
}
