// Package pipeline assembles regressd's roles on a bus and a database: it
// opens (or starts, embedded) NATS JetStream and PostgreSQL, runs the
// scheduler, producer, worker, writer and gateway a Config names in this
// process, serves their HTTP endpoints, and stops them all, joined, on
// Close. It is the one place the roles meet in code: 'regressd run', each
// role command, 'regressd demo', the benchmark and the end-to-end tests
// start the pipeline through it. The roles themselves meet only on the bus.
package pipeline
