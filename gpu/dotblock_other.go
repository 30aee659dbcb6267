//go:build !amd64 || purego

package gpu

// This build has no vector block kernel: dotBlock runs its Go loop.
var (
	dotBlockHasFMA    = false
	dotBlockHasAVX512 = false
)

func dotBlockFMA(a0, a1, a2, a3, b0, b1, b2, b3 *float64, k int, out *[16]float64) {
	panic("dotBlockFMA: no vector loop in this build")
}

func dotBlockAVX512(a0, a1, a2, a3, b0, b1, b2, b3 *float64, k int, out *[16]float64) {
	panic("dotBlockAVX512: no vector loop in this build")
}
