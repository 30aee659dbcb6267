//go:build !amd64 || purego

package gpu

var (
	expVector    = false
	expVector512 = false
)

func expScaledAsm(dst, src *float64, n int, s, off float64, table *[14][4]float64) {
	panic("expScaledAsm without the amd64 kernel")
}

func expScaledAVX512(dst, src *float64, n int, s, off float64, table *[14][4]float64) {
	panic("expScaledAVX512 without the amd64 kernel")
}
