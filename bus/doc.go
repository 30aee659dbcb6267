// Package bus owns regressd's JetStream plumbing: the embedded server, client
// connections, and the idempotent creation of the streams, key-value buckets
// and object store named in package schemas.
package bus
