//go:build !amd64 || purego

package gpu

// attendKernels lists the kernels this build can run, portableKernel first.
func attendKernels() []attendKernel { return []attendKernel{portableKernel} }

// queryKeysFast reports that no vector query keys run here (keysAt does).
func (c *contextFit) queryKeysFast(int, []float64, []float32) bool { return false }
