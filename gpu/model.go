package gpu

import "errors"

// ErrUnknownModel is returned by NewRegressor for a slug that is not built in.
var ErrUnknownModel = errors.New("unknown model")

// ErrThinkingPolicy is returned when a memory policy is given to a thinking
// model: its test-time search sizes its own working set, so the gateway
// answers 400 (seed, Errors rule 6).
var ErrThinkingPolicy = errors.New("thinking models do not accept a memory_policy")

// ModelInfo describes one built-in model.
type ModelInfo struct {
	Slug        string
	Description string
	// Thinking models spend extra compute at test time and reject a
	// memory_policy.
	Thinking bool
	// Layers is the number of attention layers (L in the cache size).
	Layers int
	// HeadWidth is E, the width of each key and value vector per layer,
	// feature group and context row.
	HeadWidth int
}

// modelConfig is how much work a model does; see models for the values.
type modelConfig struct {
	info       ModelInfo
	layers     []layerSpec
	gp         gpFitConfig
	isoGP      bool // also fit a one-length-scale GP (more robust on few rows)
	solveChunk int  // most rows one GP expert solves
	stackRows  int  // most context rows scored to choose the readout weights
	foldRows   int  // contexts up to this size use k-fold stacking (0: never)
	folds      int  // folds of k-fold stacking
	bags       int  // bagged ensemble-selection rounds
}

// headsPerLayer is H; each head has a 2-wide key and value slice per feature
// group, so E = 2·H.
const headsPerLayer = 12

// headWidth is E.
const headWidth = 2 * headsPerLayer

// A quad is four heads: their 2-wide slices of one group fill one 8-lane
// float32 vector, the unit the score kernels work in. A layer is quads
// quads; stores keep each quad's slices together (see slot).
const (
	quadHeads = 4
	quadWidth = 2 * quadHeads
	quads     = headsPerLayer / quadHeads
)

// slot is where coordinate c of head h's slice of group g sits in a row's
// vectors (groups × E floats): quad-major, [quad][group][2·(h mod 4)+c], so
// one quad's slices of every group are contiguous for the score kernels.
// The vector of group g is still the E values slot(g, ·, ·) names.
func slot(g, h, c, groups int) int {
	return (h/quadHeads)*groups*quadWidth + g*quadWidth + 2*(h%quadHeads) + c
}

// models lists the built-in models. The names count layers: more layers are
// more head families for the readout to choose from, at more compute.
func models() []modelConfig {
	gpDefault := gpFitConfig{starts: []float64{1, 0.2, 0.02}, rows: 384, screenIters: 12, iters: 50, refineRows: 800, refineIters: 10}
	return []modelConfig{
		{
			info: ModelInfo{
				Slug:        "regressd/model-2l",
				Description: "fast: 2 attention layers (Gaussian-process solve heads and top-k neighbour heads), quick hyperparameter fit",
			},
			layers:     []layerSpec{layerSolve, layerTopK},
			gp:         gpFitConfig{starts: []float64{1, 0.05}, rows: 256, screenIters: 8, iters: 25},
			isoGP:      true,
			solveChunk: 1024,
			stackRows:  2048,
			bags:       8,
		},
		{
			info: ModelInfo{
				Slug:        "regressd/model-4l",
				Description: "4 attention layers (GP solve, kernel smoothing, local and top-k neighbour heads) stacked by leave-one-out",
			},
			layers:     []layerSpec{layerSolve, layerSmooth, layerLocal, layerTopK},
			gp:         gpDefault,
			isoGP:      true,
			solveChunk: 2048,
			stackRows:  4096,
			foldRows:   200,
			folds:      10,
			bags:       16,
		},
		{
			info: ModelInfo{
				Slug:        "regressd/model-4l-thinking",
				Description: "model-4l with test-time search: five hyperparameter restarts refined on more rows, and 5-fold stacking with hyperparameters refit per fold on contexts up to 400 rows; several times slower, rejects memory_policy",
				Thinking:    true,
			},
			layers:     []layerSpec{layerSolve, layerSmooth, layerLocal, layerTopK},
			gp:         gpFitConfig{starts: []float64{2, 1, 0.3, 0.1, 0.02}, rows: 384, screenIters: 12, iters: 60, refineRows: 1000, refineIters: 12},
			isoGP:      true,
			solveChunk: 3072,
			stackRows:  8192,
			foldRows:   400,
			folds:      5,
			bags:       32,
		},
	}
}

// Models lists the built-in models.
func Models() []ModelInfo {
	ms := models()
	out := make([]ModelInfo, len(ms))
	for i, m := range ms {
		out[i] = m.info
		out[i].Layers = len(m.layers)
		out[i].HeadWidth = headWidth
	}
	return out
}

// DefaultModel is the slug used when a caller names none.
const DefaultModel = "regressd/model-4l"

// LookupModel returns the built-in model with this slug.
func LookupModel(slug string) (ModelInfo, bool) {
	for _, m := range Models() {
		if m.Slug == slug {
			return m, true
		}
	}
	return ModelInfo{}, false
}

func lookupConfig(slug string) (modelConfig, bool) {
	for _, m := range models() {
		if m.info.Slug == slug {
			m.info.Layers = len(m.layers)
			m.info.HeadWidth = headWidth
			return m, true
		}
	}
	return modelConfig{}, false
}
