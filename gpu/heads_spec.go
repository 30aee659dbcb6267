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

var (
	layerSolve = layerSpec{
		{kind: kindSolve, metric: metricARD, mult: 1},
		{kind: kindSolve, metric: metricISO, mult: 1},
		{kind: kindSmooth, metric: metricARD, mult: 1},
		{kind: kindSmooth, metric: metricISO, mult: 1},
	}
	layerSmooth = layerSpec{
		{kind: kindSmooth, metric: metricARD, mult: 0.5},
		{kind: kindSmooth, metric: metricISO, mult: 0.5},
		{kind: kindLocal, metric: metricARD, mult: 1, k: 3},
		{kind: kindLocal, metric: metricISO, mult: 1, k: 3},
	}
	layerLocal = layerSpec{
		{kind: kindLocal, metric: metricARD, mult: 1, k: 6},
		{kind: kindLocal, metric: metricISO, mult: 1, k: 6},
		{kind: kindLocal, metric: metricARD, mult: 1, k: 12},
		{kind: kindLocal, metric: metricISO, mult: 1, k: 12},
	}
	layerTopK = layerSpec{
		{kind: kindTopK, metric: metricARD, mult: 1, k: 5},
		{kind: kindTopK, metric: metricISO, mult: 1, k: 5},
		{kind: kindTopK, metric: metricARD, mult: 1, k: 10},
		{kind: kindTopK, metric: metricISO, mult: 1, k: 10},
	}
)
