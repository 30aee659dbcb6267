// Package writer consumes results: it writes <measurement>_regressed and the
// task ledger in one transaction, completes tasks and publishes their
// summaries. A redelivered result finds its ledger row and writes nothing.
package writer
