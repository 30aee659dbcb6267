//go:build !amd64 || purego

package gpu

// attendKernels lists the kernels this build can run, portableKernel first.
func attendKernels() []attendKernel { return []attendKernel{portableKernel} }
