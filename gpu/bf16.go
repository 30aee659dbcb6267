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

// int8 vectors keep their absmax scale in one byte, a code on a log scale
// of sixteenth octaves: code c in [1, 254] is the scale 2^((c−200)/16),
// from about 1.8·10⁻⁴ to 10.4 (keys are at most keyClamp = 48, a scale of
// 0.38; values at most 1, with a second digit); code 0 is the scale 0 (an
// all-zero vector) and code 255 a non-finite one (NaN). A vector whose
// absmax is below 127 × 1.8·10⁻⁴ is held to 1.8·10⁻⁴ absolute. Rounding
// the scale up to the next code widens the step by at most 2^(1/16)
// (4.4 %); a byte instead of a float32 is what brings int8 to about half
// the bf16 bytes. (Eighth octaves, a 9 % step, moved the suite's int8 R²
// measurably more: see docs/BENCHMARKS.md.)
const (
	scaleCodeZero  = 0
	scaleCodeNaN   = 255
	scaleCodeBias  = 200
	scaleCodeSteps = 16 // codes per octave
)

// int8Scale is the scale of each code.
var int8Scale = func() (t [256]float32) {
	for c := 1; c < scaleCodeNaN; c++ {
		t[c] = float32(math.Exp2(float64(c-scaleCodeBias) / scaleCodeSteps))
	}
	t[scaleCodeNaN] = float32(math.NaN())
	return t
}()

// quantInt8 stores v (one key or value vector) as int8 codes with one
// absmax scale: the scale s is the smallest code's that holds max|v| in
// 127 steps (the smallest code's if even that one does; the largest code's
// if none does), q = round(v/s), so |v − q·s| ≤ s/2 for |v| ≤ 127·s. It
// returns the scale's code.
func quantInt8(v []float32, q []int8) uint8 {
	var amax float32
	for _, x := range v {
		amax = max(amax, float32(math.Abs(float64(x))))
	}
	if amax == 0 || math.IsInf(float64(amax), 0) || math.IsNaN(float64(amax)) {
		for i := range q {
			q[i] = 0
		}
		if amax == 0 {
			return scaleCodeZero
		}
		return scaleCodeNaN
	}
	c := int(math.Ceil(scaleCodeSteps*math.Log2(float64(amax)/127))) + scaleCodeBias
	c = min(max(c, 1), scaleCodeNaN-1)
	for c < scaleCodeNaN-1 && int8Scale[c]*127 < amax {
		c++
	}
	for c > 1 && int8Scale[c-1]*127 >= amax {
		c--
	}
	inv := 1 / int8Scale[c]
	for i, x := range v {
		r := float32(math.RoundToEven(float64(x * inv)))
		q[i] = int8(min(max(r, -127), 127))
	}
	return uint8(c)
}
