//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// expVector: expScaled runs its AVX2 loop (expvec_amd64.s) on this CPU;
// expVector512: its AVX-512 loop first. Variables so that tests can run each.
var (
	expVector    = cpu.X86.HasAVX2
	expVector512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F
)

// expScaledAsm is expScaled over the first n elements (n a positive
// multiple of 4), with expNeg's operations in its order (separate
// multiplies and adds, no FMA; floor by VROUNDPD; 2^k through the exponent
// bits).
//
//go:noescape
func expScaledAsm(dst, src *float64, n int, s, off float64, table *[14][4]float64)

// expScaledAVX512 is expScaledAsm in eight lanes (n a positive multiple of
// 8), the same operations in the same order.
//
//go:noescape
func expScaledAVX512(dst, src *float64, n int, s, off float64, table *[14][4]float64)
