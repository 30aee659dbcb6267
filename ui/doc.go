// Package ui serves regressd's status page on --http-addr: GET /ui/ lists
// the triggers with their last runs, the recent runs, the dead-letter count
// and the workers' circuit breaker; /ui/triggers/<name> charts a trigger's
// series with its filled points; /ui/runs/<task_id> shows a run's report.
//
// The page is static HTML, CSS and JavaScript embedded in the binary, with
// uPlot vendored for the chart; its script renders the answers of the JSON
// endpoints this package adds to the admin API (GET /api/v3/status,
// /api/v3/runs, /api/v3/runs/<task_id>, /api/v3/triggers/<name>/series), so
// the page and scripts see the same facts. It is read-only and behind the
// admin API's access rule.
//
// Roles meet only on the bus and in storage: triggers come from their KV
// bucket, the dead-letter count from REGRESS_DLQ, the breakers from the
// workers' entries in the status bucket, and runs and series from
// PostgreSQL through tsdb.
package ui
