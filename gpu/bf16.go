package gpu

import "math"

// toBF16 rounds a float32 to bfloat16 (the top 16 bits of a float32) with
// round-to-nearest, ties to even. NaN stays NaN (quiet, sign kept); values
// that round past the largest finite bf16 become ±Inf, as IEEE rounding does.
func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep it a NaN after truncation
		return uint16(b>>16) | 0x0040
	}
	// Add 0x7fff plus the lowest kept bit: below half rounds down, above half
	// rounds up, exactly half rounds to the even neighbour.
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// fromBF16 widens a bfloat16 to float32 exactly.
func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundBF16 is f after a round trip through bf16.
func roundBF16(f float32) float32 { return fromBF16(toBF16(f)) }

// quantInt8 stores v (one key or value vector) as int8 with one absmax
// scale: q = round(v/scale), scale = max|v|/127, so |v − q·scale| ≤ scale/2.
func quantInt8(v []float32, q []int8) float32 {
	var amax float32
	for _, x := range v {
		amax = max(amax, float32(math.Abs(float64(x))))
	}
	if amax == 0 || math.IsInf(float64(amax), 0) || math.IsNaN(float64(amax)) {
		for i := range q {
			q[i] = 0
		}
		if amax == 0 {
			return 0
		}
		return float32(math.NaN())
	}
	scale := amax / 127
	inv := 1 / scale
	for i, x := range v {
		r := float32(math.RoundToEven(float64(x * inv)))
		q[i] = int8(min(max(r, -127), 127))
	}
	return scale
}
