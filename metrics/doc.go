// Package metrics owns regressd's Prometheus metrics: one registry per
// process with the Go and process collectors, the pipeline's histograms,
// counters and gauges, and collectors that read JetStream consumer info,
// the NATS connection and the database pool at scrape time.
//
// A process builds one *Metrics with New and hands it to its roles; a nil
// *Metrics records nothing, so a role given none still runs. Every label
// takes values from a fixed set (unknown values become "other"): never a
// task id, a series tag or an error text. The one label an operator
// chooses is a scheduled trigger's name, bounded by the triggers defined.
//
// ops/METRICS.md lists every metric; the alerts, the dashboard and the
// autoscaler under ops/ use only those names (TestMetricsMatchOpsList here
// and the ops module's TestOpsUseListedMetrics keep them in step).
package metrics
