package eval

import "fmt"

// Folds names how a dataset's rows are split into context and queries.
type Folds string

const (
	// FoldsRandom is the fixed splits of splits/<name>.csv (80/20 at
	// random in shared/data).
	FoldsRandom Folds = "random"
	// FoldsBlocks is five contiguous fifths of the rows in file (time)
	// order; each fifth is the queries once, the other four the context:
	// gaps that come in runs, as outages do.
	FoldsBlocks Folds = "blocks"
)

// blockFolds is the number of contiguous blocks of FoldsBlocks.
const blockFolds = 5

// Validate says whether k is a known kind.
func (k Folds) Validate() error {
	switch k {
	case FoldsRandom, FoldsBlocks:
		return nil
	}
	return fmt.Errorf("unknown folds %q: want %q or %q", string(k), FoldsRandom, FoldsBlocks)
}

// BlockFolds splits rows 0…n−1 into k contiguous blocks, as
// numpy.array_split does (the first n mod k blocks hold one row more, so
// scripts/baselines.py scores the very same folds); out[b][i] is true when
// row i is in block b.
func BlockFolds(n, k int) [][]bool {
	out := make([][]bool, k)
	lo := 0
	for b := range k {
		size := n / k
		if b < n%k {
			size++
		}
		out[b] = make([]bool, n)
		for i := lo; i < lo+size; i++ {
			out[b][i] = true
		}
		lo += size
	}
	return out
}
