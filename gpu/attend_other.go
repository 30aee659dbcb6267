//go:build !amd64 || purego

package gpu

// archKernel is the score kernel scores uses: plain Go on this build.
var archKernel = portableKernel

// attendKernels lists the kernels this build can run, portableKernel first.
func attendKernels() []attendKernel { return []attendKernel{portableKernel} }
