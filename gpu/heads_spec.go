package gpu

// Head kinds beyond kindSolve and kindSmooth (heads.go).
const (
	// kindLocal: Gaussian weights whose bandwidth is the query's distance to
	// its k-th nearest context row: a smooth, density-adaptive kNN.
	kindLocal = iota + 2
	// kindTopK: attention restricted to the k nearest keys, equal weights.
	kindTopK
)

// Metrics a head measures distance in.
const (
	metricARD = iota // per-feature length scales from the GP marginal likelihood
	metricISO        // one length scale for every standardised feature
)

// headSpec is one head of a layer.
type headSpec struct {
	kind   int
	metric int
	mult   float64 // bandwidth multiple of the metric's length scales
	k      int     // neighbours, for kindLocal and kindTopK
}

// layerSpec is the headsPerLayer heads of one layer.
type layerSpec [headsPerLayer]headSpec

// both is a head in each metric, ARD then isotropic.
func both(h headSpec) []headSpec {
	a, b := h, h
	a.metric, b.metric = metricARD, metricISO
	return []headSpec{a, b}
}

// scales is a pair of heads of this kind per bandwidth multiple.
func scales(kind int, mults ...float64) []headSpec {
	var out []headSpec
	for _, m := range mults {
		out = append(out, both(headSpec{kind: kind, mult: m})...)
	}
	return out
}

// counts is a pair of heads of this kind per neighbour count, at one
// bandwidth multiple.
func counts(kind int, mult float64, ks ...int) []headSpec {
	var out []headSpec
	for _, k := range ks {
		out = append(out, both(headSpec{kind: kind, mult: mult, k: k})...)
	}
	return out
}

// layer assembles headsPerLayer heads.
func layer(parts ...[]headSpec) layerSpec {
	var all []headSpec
	for _, p := range parts {
		all = append(all, p...)
	}
	if len(all) != headsPerLayer {
		panic("gpu: a layer needs headsPerLayer heads")
	}
	return layerSpec(all)
}

// The layers: kernel smoothers at a ladder of bandwidths (multi-scale),
// local and top-k heads at a ladder of neighbour counts. Local and top-k
// heads are scale-invariant (their bandwidth is a neighbour's distance),
// so their multiple only sets their keys' magnitude: it matches the
// layer's smallest, so one int8 scale per vector serves every head alike.
var (
	layerSolve  = layer(scales(kindSolve, 1), scales(kindSmooth, 1, 1.5, 2, 3), counts(kindLocal, 1, 4))
	layerSmooth = layer(scales(kindSmooth, 0.35, 0.5, 0.7), counts(kindLocal, 0.35, 3, 4, 6))
	layerLocal  = layer(counts(kindLocal, 1, 6, 8, 12, 16, 24, 32))
	layerTopK   = layer(counts(kindTopK, 1, 5, 10, 15, 20, 30, 40))
)
