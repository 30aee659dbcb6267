//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// sqDistAcc's vector paths on this CPU (sqdist_amd64.s); variables so that
// tests can compare each with the Go loop.
var (
	sqDistHasAVX512 = cpu.X86.HasAVX512F
	sqDistHasAVX2   = cpu.X86.HasAVX2
)

//go:noescape
func sqDistAccAVX512(dst, src *float64, n int, c, w float64)

//go:noescape
func sqDistAccAVX2(dst, src *float64, n int, c, w float64)

//go:noescape
func sqDistScaledAccAVX512(dst, src *float64, n int, c, w float64)

//go:noescape
func sqDistScaledAccAVX2(dst, src *float64, n int, c, w float64)

// wsqSumAVX512 is Σ_{j<n} c[j]·(x[j]−z)² in eight-lane FMA sums (n
// positive).
//
//go:noescape
func wsqSumAVX512(c, x *float64, n int, z float64) float64
