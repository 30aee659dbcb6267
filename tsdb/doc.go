// Package tsdb is regressd's access to measurement tables in PostgreSQL:
// introspection, window reads into Arrow, existing-prediction lookups, and
// the DDL and writes of <measurement>_regressed, and the reads behind the
// status page (the task ledger, a series with its filled points).
// Identifiers are always quoted; values are always bound parameters.
//
// A measurement is a table with a `time` column (timestamptz, or timestamp
// read as UTC), tag columns (text types) and field columns (numeric types).
// Columns of other types are ignored unless a trigger names them, which is
// refused.
package tsdb
