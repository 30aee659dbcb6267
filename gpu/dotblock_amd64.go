//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// The block kernel's vector paths on this CPU (dotblock_amd64.s). Both are
// variables so that tests can compare each path with the Go loop.
var (
	dotBlockHasFMA    = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	dotBlockHasAVX512 = cpu.X86.HasAVX512F
)

// dotBlockFMA sets out[4r+c] to the sum over t < k of ar[t]·bc[t], with
// AVX2 FMAs in four lanes; k is a positive multiple of 4.
//
//go:noescape
func dotBlockFMA(a0, a1, a2, a3, b0, b1, b2, b3 *float64, k int, out *[16]float64)

// dotBlockAVX512 is dotBlockFMA in eight lanes, for any positive k (the
// last k mod 8 through masked loads).
//
//go:noescape
func dotBlockAVX512(a0, a1, a2, a3, b0, b1, b2, b3 *float64, k int, out *[16]float64)
