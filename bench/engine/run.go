package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/regressd/regressd/gpu"
)

// Config is the grid of cells and how the reference side is built.
type Config struct {
	// Rows, Queries and Features span the grid: every combination is a cell.
	Rows, Queries, Features []int
	// Model is the built-in model both sides run.
	Model string
	// Ref is the reference commit (DefaultRef); RefBin a prebuilt driver
	// (skips the build); NoRef runs this tree's side alone.
	Ref, RefBin string
	NoRef       bool
	// Root is the repository the reference is built from ("" finds it from
	// the working directory).
	Root string
	// CPUProfile names a CPU profile of this tree's side ("" writes none).
	CPUProfile string
	// Options are given to this tree's regressors.
	Options []gpu.Option
	// Command is echoed in the report; Progress receives a line per side.
	Command  string
	Progress io.Writer
}

// DefaultConfig is the small grid 'regressd bench engine' runs with no
// flags: the full one (1k/10k/100k rows × 1k/10k queries × 8/32 features)
// takes hours on a small machine, the reference side most of them.
func DefaultConfig() Config {
	return Config{Rows: []int{1000, 10000}, Queries: []int{1000}, Features: []int{8}, Model: gpu.DefaultModel, Ref: DefaultRef}
}

// Cell is one grid point measured on both sides.
type Cell struct {
	Rows     int     `json:"rows"`
	Queries  int     `json:"queries"`
	Features int     `json:"features"`
	Cur      Timing  `json:"current"`
	Ref      *Timing `json:"reference,omitempty"`
	// Speedup is reference time / current time per phase (0 where a side
	// did not have the phase).
	Speedup map[string]float64 `json:"speedup,omitempty"`
	// MaxAbsDiff is the largest |current − reference| prediction.
	MaxAbsDiff float64 `json:"max_abs_diff,omitempty"`
}

// Report is a whole run.
type Report struct {
	Command    string `json:"command"`
	Model      string `json:"model"`
	Ref        string `json:"reference_commit,omitempty"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Cells      []Cell `json:"cells"`
}

// Run measures every cell: the reference side (a subprocess) then this
// tree's, one cell after the other.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Command: cfg.Command, Model: cfg.Model, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	bin := cfg.RefBin
	if !cfg.NoRef {
		rep.Ref = cfg.Ref
		if bin == "" {
			root := cfg.Root
			if root == "" {
				wd, err := os.Getwd()
				if err != nil {
					return nil, fmt.Errorf("bench engine: %w", err)
				}
				if root, err = RepoRoot(ctx, wd); err != nil {
					return nil, fmt.Errorf("bench engine: the reference is built from the repository (or pass --ref-bin, or --no-ref): %w", err)
				}
			}
			fmt.Fprintf(progress, "building the reference engine of %s\n", cfg.Ref)
			b, cleanup, err := RefBuild(ctx, root, cfg.Ref)
			if err != nil {
				return nil, fmt.Errorf("bench engine: %w", err)
			}
			defer cleanup()
			bin = b
		}
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return nil, fmt.Errorf("bench engine: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("bench engine: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	for _, n := range cfg.Rows {
		for _, q := range cfg.Queries {
			for _, f := range cfg.Features {
				c := Cell{Rows: n, Queries: q, Features: f}
				if bin != "" {
					t, err := runRef(ctx, bin, cfg.Model, n, q, f)
					if err != nil {
						return nil, err
					}
					c.Ref = &t
					fmt.Fprintf(progress, "%6d × %5d × %2d reference: fit %.2fs predict %.2fs\n", n, q, f, t.Fit.Wall, t.Predict.Wall)
				}
				X, y, Xq, yq := Data(n, q, f)
				r, err := gpu.NewRegressor(cfg.Model, cfg.Options...)
				if err != nil {
					return nil, fmt.Errorf("bench engine: %w", err)
				}
				e := curEngine{ctx: ctx, r: r}
				c.Cur, err = Measure(e, X, y, Xq, yq)
				e.Close()
				if err != nil {
					return nil, fmt.Errorf("bench engine: %d × %d × %d: %w", n, q, f, err)
				}
				fmt.Fprintf(progress, "%6d × %5d × %2d current:   fit %.2fs predict %.2fs\n", n, q, f, c.Cur.Fit.Wall, c.Cur.Predict.Wall)
				if c.Ref != nil {
					c.Speedup = speedups(*c.Ref, c.Cur)
					for i, p := range c.Cur.Preds {
						c.MaxAbsDiff = math.Max(c.MaxAbsDiff, math.Abs(p-c.Ref.Preds[i]))
					}
					c.Ref.Preds = nil
				}
				c.Cur.Preds = nil
				rep.Cells = append(rep.Cells, c)
			}
		}
	}
	return rep, nil
}

func speedups(ref, cur Timing) map[string]float64 {
	ratio := func(a, b Phase) float64 {
		if a.Wall <= 0 || b.Wall <= 0 {
			return 0
		}
		return a.Wall / b.Wall
	}
	cpu := func(a, b Phase) float64 {
		if a.CPU <= 0 || b.CPU <= 0 {
			return 0
		}
		return a.CPU / b.CPU
	}
	return map[string]float64{
		"fit": ratio(ref.Fit, cur.Fit), "predict": ratio(ref.Predict, cur.Predict),
		"cache": ratio(ref.Cache, cur.Cache), "warm": ratio(ref.Warm, cur.Warm), "whole": ratio(ref.Whole, cur.Whole),
		// CPU seconds: steadier than wall time on a shared machine.
		"fit_cpu": cpu(ref.Fit, cur.Fit), "predict_cpu": cpu(ref.Predict, cur.Predict), "whole_cpu": cpu(ref.Whole, cur.Whole),
	}
}

func runRef(ctx context.Context, bin, model string, n, q, f int) (Timing, error) {
	cmd := exec.CommandContext(ctx, bin, "-model", model, "-rows", strconv.Itoa(n), "-queries", strconv.Itoa(q), "-features", strconv.Itoa(f))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Timing{}, fmt.Errorf("bench engine: reference %d × %d × %d: %w: %s", n, q, f, err, strings.TrimSpace(stderr.String()))
	}
	var t Timing
	if err := json.Unmarshal(out, &t); err != nil {
		return Timing{}, fmt.Errorf("bench engine: reference output: %w", err)
	}
	return t, nil
}

// curEngine is this tree's engine behind Engine.
type curEngine struct {
	ctx context.Context
	r   *gpu.Regressor
}

func (e curEngine) Fit(X [][]float64, y []float64) error      { return e.r.Fit(e.ctx, X, y) }
func (e curEngine) Predict(Xq [][]float64) ([]float64, error) { return e.r.Predict(e.ctx, Xq) }
func (e curEngine) CacheBytes() int64                         { return e.r.MemoryReport().CacheBytes }
func (e curEngine) Close()                                    { e.r.Close() }

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes one line per cell and side, then the ratios.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "regressd bench engine: %s, GOMAXPROCS %d", r.Model, r.GOMAXPROCS)
	if r.Ref != "" {
		fmt.Fprintf(w, ", reference %s", r.Ref)
	}
	fmt.Fprintf(w, "\n%s\n\n", r.Command)
	fmt.Fprintf(w, "%-22s %-9s %9s %9s %9s %9s %9s %7s %8s\n", "rows × queries × feat", "side", "fit s", "predict s", "cache s", "warm s", "whole s", "cores", "R²")
	for _, c := range r.Cells {
		cell := fmt.Sprintf("%d × %d × %d", c.Rows, c.Queries, c.Features)
		line := func(side string, t Timing) {
			cores := 0.0
			if t.Whole.Wall > 0 {
				cores = t.Whole.CPU / t.Whole.Wall
			}
			fmt.Fprintf(w, "%-22s %-9s %9.3f %9.3f %9.3f %9.3f %9.3f %7.2f %8.4f\n", cell, side, t.Fit.Wall, t.Predict.Wall, t.Cache.Wall, t.Warm.Wall, t.Whole.Wall, cores, t.R2)
		}
		if c.Ref != nil {
			line("reference", *c.Ref)
		}
		line("current", c.Cur)
		if c.Speedup != nil {
			s := c.Speedup
			fmt.Fprintf(w, "%-22s %-9s %8.2f× %8.2f× %8.2f× %8.2f× %8.2f×   max |Δpred| %.3g\n", cell, "speedup", s["fit"], s["predict"], s["cache"], s["warm"], s["whole"], c.MaxAbsDiff)
			fmt.Fprintf(w, "%-22s %-9s %8.2f× %8.2f× %9s %9s %8.2f×   (CPU seconds)\n", cell, "cpu ratio", s["fit_cpu"], s["predict_cpu"], "", "", s["whole_cpu"])
		}
	}
}
