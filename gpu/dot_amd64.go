//go:build amd64 && !purego

package gpu

import "golang.org/x/sys/cpu"

// dot4Vector: dot4 runs its AVX2 loop (dot_amd64.s) on this CPU.
var dot4Vector = cpu.X86.HasAVX2

// dot4Lanes writes the four running sums of dot(a, bk) over the first m
// elements (m a positive multiple of 4) to lanes[4k:4k+4]. Lane j of each
// sum adds a[i]·bk[i] for i ≡ j (mod 4) in increasing i, with separate
// multiplies and adds (no FMA), exactly as dot's s0…s3 do.
//
//go:noescape
func dot4Lanes(a, b0, b1, b2, b3 *float64, m int, lanes *[16]float64)

// dot2x4Lanes writes the running sums of dot(ar, bk) over the first m
// elements (m a positive multiple of 4) to lanes[16r+4k : 16r+4k+4], in
// dot's lane order with separate multiplies and adds.
//
//go:noescape
func dot2x4Lanes(a0, a1, b0, b1, b2, b3 *float64, m int, lanes *[32]float64)
