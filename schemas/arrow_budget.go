package schemas

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// errDecodeBudget is the panic a budgetAllocator raises; DecodeRecord
// recovers it into an error.
var errDecodeBudget = errors.New("the stream asks for more memory than a message of its size can hold")

// budgetAllocator hands out at most `left` bytes. The IPC reader trusts
// lengths written inside the stream (an uncompressed size, a body length):
// a few garbled bytes would otherwise make it allocate gigabytes, which the
// fuzz target found. Not safe for concurrent use: one per decode.
type budgetAllocator struct {
	memory.Allocator
	left int
}

// decodeBudget is what decoding n bytes may allocate: generous for Arrow's
// own compressed buffers, small for a few bytes.
func decodeBudget(n int) int { return 16<<20 + 64*n }

func (a *budgetAllocator) Allocate(size int) []byte {
	a.spend(size)
	return a.Allocator.Allocate(size)
}

func (a *budgetAllocator) Reallocate(size int, b []byte) []byte {
	a.spend(size - len(b))
	return a.Allocator.Reallocate(size, b)
}

func (a *budgetAllocator) spend(n int) {
	if n <= 0 {
		return
	}
	if n > a.left {
		panic(errDecodeBudget)
	}
	a.left -= n
}
