//go:build !amd64 || purego

package gpu

// qkeysHasAVX2 is false: no AVX2 query keys here.
var qkeysHasAVX2 = false

// queryKeysAVX2 reports that no AVX2 query keys run here (keysAt does).
func (c *contextFit) queryKeysAVX2(int, []float64, []float32) bool { return false }
