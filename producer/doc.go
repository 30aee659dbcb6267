// Package producer consumes jobs: it checks the measurement's schema, reads
// the window into Arrow, selects examples and queries, applies skip_existing
// and the caps, ships the context once per task through the object store and
// publishes the queries in batches. It never calls the model.
package producer
