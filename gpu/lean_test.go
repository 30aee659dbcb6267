package gpu

import (
	"math"
	"testing"
)

// TestLeanWeighsBlocksByWhatIsAtStake: a series whose relation drifts in
// its last block. On the first four blocks the readouts and the forest
// agree but for a small wiggle (each block's own share is −1, the forest a
// hair worse); on the last, where the relation has moved, the readouts miss
// by a whole unit and the forest is exact. The blocks' share is the one
// that maximises their mean R²: the last block's errors decide it (≈ 1),
// where one vote per block gave it a fifth. The scattered rows, which the
// readouts predict exactly, keep their half at 0.
func TestLeanWeighsBlocksByWhatIsAtStake(t *testing.T) {
	m := 100
	nc := 2 + headsPerLayer // trend, one layer of heads, the forest
	wiggle := func(a int) float64 { return 0.05 * math.Sin(float64(7*a)) }
	held := func(blocks bool) *heldOut {
		h := &heldOut{cands: make([][]float64, nc)}
		for k := range h.cands {
			h.cands[k] = make([]float64, m)
		}
		for a := range m {
			y := math.Cos(float64(a) / 9)
			h.target = append(h.target, y)
			h.rows = append(h.rows, a)
			h.cands[0][a], h.cands[nc-1][a] = y, y+wiggle(a)
			if !blocks {
				continue
			}
			b := a * blockCV / m
			h.block = append(h.block, b)
			h.dist = append(h.dist, 0)
			h.beyond = append(h.beyond, false)
			if b == blockCV-1 {
				h.cands[0][a], h.cands[nc-1][a] = y+1, y // drifted: the readouts miss
			} else {
				h.cands[0][a], h.cands[nc-1][a] = y+wiggle(a), y+2*wiggle(a)
			}
		}
		if blocks {
			h.extra = [2][]float64{make([]float64, m), make([]float64, m)}
		}
		return h
	}
	c := leanedOn(held)
	// The blocks' half: the last block's 20 rows of unit error against
	// four blocks' 0.05-sized disagreement.
	if c.edge.lean < 0.45 || c.edge.lean > 0.5 {
		t.Errorf("lean %g, want the blocks' half near 1 and the scattered rows' 0: in [0.45, 0.5] (one vote per block gave 0.1)", c.edge.lean)
	}
}

// TestLeanFlatBlock: a block whose targets are all one value (any error
// ruins its R²) weighs the blocks' share heavily but finitely — about ten
// average blocks — not alone. The readouts miss every row by 0.3; the
// forest is exact but on the flat block, where it misses by 0.6 the other
// side (that block's own share ½, the others' 1).
func TestLeanFlatBlock(t *testing.T) {
	m := 100
	nc := 2 + headsPerLayer
	held := func(blocks bool) *heldOut {
		h := &heldOut{cands: make([][]float64, nc)}
		for k := range h.cands {
			h.cands[k] = make([]float64, m)
		}
		for a := range m {
			b := a * blockCV / m
			y := math.Cos(float64(a) / 9)
			if b == 0 {
				y = 0 // flat at the context's mean
			}
			h.target = append(h.target, y)
			h.rows = append(h.rows, a)
			h.cands[0][a], h.cands[nc-1][a] = y+0.3, y
			if b == 0 {
				h.cands[nc-1][a] = y - 0.3
			}
			if blocks {
				h.block = append(h.block, b)
				h.dist = append(h.dist, 0)
				h.beyond = append(h.beyond, false)
			}
		}
		if blocks {
			h.extra = [2][]float64{make([]float64, m), make([]float64, m)}
		}
		return h
	}
	c := leanedOn(held)
	// The scattered rows' half is the pooled share over all rows, ¾. The
	// flat block alone would make the blocks' half ½ (lean 0.625; a
	// floor of a thousandth of the context's spread gave 0.628), the four
	// others alone 1 (0.875); weighing about ten blocks, it leaves the
	// blocks' half near 0.54.
	if !(c.edge.lean > 0.64 && c.edge.lean < 0.875) {
		t.Errorf("lean %g with a flat block, want in (0.64, 0.875): the flat block weighs about ten others, not all", c.edge.lean)
	}
}

// leanedOn is a context of one layer whose readout is the trend alone,
// leaned on its forest by the held-out rows held(false) (scattered) and
// held(true) (blocks).
func leanedOn(held func(blocks bool) *heldOut) *contextFit {
	far := &farReadout{w: make([][headsPerLayer]float64, 1)}
	c := &contextFit{trendW: 1, layers: make([][headsPerLayer]head, 1), edge: &edgeModel{beyond: far, gap: far}}
	c.leanOnForest(held(false), held(true))
	return c
}
