// Package gpu is regressd's built-in in-context regression engine: models,
// device memory, the memory policy, the KV cache, kernels and the memory
// report. It knows nothing of NATS or SQL; the worker and the gateway call it
// through Regressor.
package gpu
