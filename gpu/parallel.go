package gpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor runs fn over [0, n) split into fixed pieces of grain items.
// The split depends only on n and grain, never on GOMAXPROCS, and every
// piece writes only its own outputs, so results are bit-identical however
// many goroutines run them.
func parallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	pieces := (n + grain - 1) / grain
	workers := min(runtime.GOMAXPROCS(0), pieces)
	if workers <= 1 {
		for lo := 0; lo < n; lo += grain {
			fn(lo, min(lo+grain, n))
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := int(next.Add(1)) - 1
				if p >= pieces {
					return
				}
				lo := p * grain
				fn(lo, min(lo+grain, n))
			}
		}()
	}
	wg.Wait()
}

// dot is the inner product of two equal-length slices, summed in a fixed
// order (four running sums) so that it is reproducible.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
