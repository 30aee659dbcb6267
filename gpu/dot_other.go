//go:build !amd64 || purego

package gpu

// dot4Vector: this build has no vector loop; dot4 calls dot four times.
const dot4Vector = false

func dot4Lanes(a, b0, b1, b2, b3 *float64, m int, lanes *[16]float64) {
	panic("dot4Lanes: no vector loop in this build")
}

func dot2x4Lanes(a0, a1, b0, b1, b2, b3 *float64, m int, lanes *[32]float64) {
	panic("dot2x4Lanes: no vector loop in this build")
}
