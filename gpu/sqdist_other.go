//go:build !amd64 || purego

package gpu

// This build has no vector loop: sqDistAcc runs its Go loop.
var (
	sqDistHasAVX512 = false
	sqDistHasAVX2   = false
)

func sqDistAccAVX512(dst, src *float64, n int, c, w float64) {
	panic("sqDistAccAVX512: no vector loop in this build")
}

func sqDistAccAVX2(dst, src *float64, n int, c, w float64) {
	panic("sqDistAccAVX2: no vector loop in this build")
}

func sqDistScaledAccAVX512(dst, src *float64, n int, c, w float64) {
	panic("sqDistScaledAccAVX512: no vector loop in this build")
}

func sqDistScaledAccAVX2(dst, src *float64, n int, c, w float64) {
	panic("sqDistScaledAccAVX2: no vector loop in this build")
}

func wsqSumAVX512(c, x *float64, n int, z float64) float64 {
	panic("wsqSumAVX512: no vector loop in this build")
}
