// Package schemas holds regressd's wire contracts: subjects and stream names,
// message headers and payloads, Arrow schemas and the embedded SQL migrations.
// It imports no other package of regressd.
package schemas
