//go:build !amd64 || purego

package gpu

const expVector = false

func expScaledAsm(dst, src *float64, n int, s, off float64, table *[14][4]float64) {
	panic("expScaledAsm without the amd64 kernel")
}
