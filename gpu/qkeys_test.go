package gpu

import (
	"fmt"
	"testing"
)

// TestQueryKeysAVX2BitIdentical holds the AVX2 query keys (queryKeysAVX2)
// to keysAtGo's bits, coordinate by coordinate, over feature counts that
// leave an odd pair and one to 33 features, with coordinates that clamp,
// tiny and huge scales and a NaN feature.
func TestQueryKeysAVX2BitIdentical(t *testing.T) {
	checkQueryKeys(t, 13, []int{1, 2, 3, 5, 8, 9, 16, 17, 33}, (*contextFit).queryKeysAVX2,
		fmt.Sprintf("no AVX2 query keys here (AVX2 %v, score kernel %s)", qkeysHasAVX2, archKernel.name))
}
