package gpu

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// refBF16 rounds f to bf16 by comparing distances in float64: the reference
// toBF16 is checked against.
func refBF16(f float32) uint16 {
	b := math.Float32bits(f)
	t := uint16(b >> 16) // truncation: toward zero in magnitude
	if b&0xffff == 0 {
		return t
	}
	lo := float64(fromBF16(t))
	var hi float64
	if t&0x7fff == 0x7f7f { // largest finite: the next step is the overflow point
		hi = math.Copysign(math.Ldexp(1, 128), lo)
	} else {
		hi = float64(fromBF16(t + 1))
	}
	x := float64(f)
	dl, dh := math.Abs(x-lo), math.Abs(hi-x)
	if dl < dh || (dl == dh && t&1 == 0) {
		return t
	}
	return t + 1 // t+1 past 0x7f7f is ±Inf's bit pattern
}

// TestBF16Exhaustive checks every float32 bit pattern (every 251st in
// -short mode, which still crosses every exponent) against refBF16.
func TestBF16Exhaustive(t *testing.T) {
	stride := uint64(1)
	if testing.Short() {
		stride = 251
	}
	const total = uint64(1) << 32
	workers := runtime.GOMAXPROCS(0)
	var bad atomic.Int64
	var first atomic.Uint64
	first.Store(math.MaxUint64)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(w) * stride; i < total; i += uint64(workers) * stride {
				f := math.Float32frombits(uint32(i))
				got := toBF16(f)
				if f != f { // NaN: must stay NaN with the same sign
					g := fromBF16(got)
					if g == g || math.Signbit(float64(g)) != math.Signbit(float64(f)) {
						bad.Add(1)
						first.CompareAndSwap(math.MaxUint64, i)
					}
					continue
				}
				if got != refBF16(f) {
					bad.Add(1)
					first.CompareAndSwap(math.MaxUint64, i)
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		i := uint32(first.Load())
		f := math.Float32frombits(i)
		t.Fatalf("%d patterns round wrongly; e.g. %#08x (%g): got %#04x want %#04x", n, i, f, toBF16(f), refBF16(f))
	}
}

func TestBF16Cases(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // exact half, even below: down
		{math.Float32frombits(0x3f818000), 0x3f82}, // exact half, odd below: up
		{math.Float32frombits(0x3f808001), 0x3f81}, // just above half: up
		{math.MaxFloat32, 0x7f80},                  // rounds past the largest bf16
		{float32(math.Inf(-1)), 0xff80},
		{float32(math.Copysign(0, -1)), 0x8000},
	} {
		if got := toBF16(tc.in); got != tc.want {
			t.Errorf("toBF16(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
}

// TestRoundTripBounds: bf16 keeps a relative error ≤ 2⁻⁹; int8 with an
// absmax scale keeps |v − q·s| ≤ s/2.
func TestRoundTripBounds(t *testing.T) {
	vals := []float32{0, 1e-30, -3.7, 1234.5, 0.1, -0.333, 7e20}
	for _, v := range vals {
		r := roundBF16(v)
		if e := math.Abs(float64(r - v)); e > math.Abs(float64(v))*math.Ldexp(1, -8) {
			t.Errorf("bf16(%g) = %g, error %g above 2⁻⁸ relative", v, r, e)
		}
	}
	for _, amax := range []float32{3, 48, 1, 1e-3, 0.37, 127, 1e-5, 1000} {
		v := []float32{0.5, -1.25, 3, 0.001, -2.999, 0, 1.5, 2}
		for i := range v {
			v[i] *= amax / 3
		}
		q := make([]int8, len(v))
		s := int8Scale[quantInt8(v, q)]
		// The scale is the smallest code's that holds amax in 127 steps,
		// or the smallest code's.
		ideal := max(amax/127, int8Scale[1])
		if s < ideal || s > ideal*float32(math.Exp2(1.0/scaleCodeSteps))*1.0001 {
			t.Errorf("amax %g: scale = %g, want in [%g, %g·2^(1/%d)]", amax, s, ideal, ideal, scaleCodeSteps)
		}
		for i, x := range v {
			if e := math.Abs(float64(float32(q[i])*s - x)); e > float64(s)/2*1.0001 {
				t.Errorf("int8 round trip of %g: error %g above half a step %g", x, e, s/2)
			}
		}
	}
	zero := make([]float32, 4)
	if c := quantInt8(zero, make([]int8, 4)); int8Scale[c] != 0 {
		t.Errorf("scale of zeros = %g, want 0", int8Scale[c])
	}
	nan := []float32{1, float32(math.NaN())}
	if c := quantInt8(nan, make([]int8, 2)); !math.IsNaN(float64(int8Scale[c])) {
		t.Errorf("scale of a NaN vector = %g, want NaN", int8Scale[c])
	}
}
