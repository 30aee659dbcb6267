// Package scheduler owns triggers: their registry in the regress_triggers
// bucket, argument parsing and validation, cron schedules, the engine HTTP
// endpoint and the admin API, publishing jobs and waiting for task results.
// It never reads measurement tables.
package scheduler
