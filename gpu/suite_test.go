package gpu

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/regressd/regressd/gpu/eval"
)

// TestSuite scores a model on a full dataset folder, once through the bf16
// cache and once through a forced int8 cache (query batches of 8 so every
// split spans several batches), and logs the table. It is slow; it runs
// only when REGRESSD_SUITE names the folder (e.g. ../../shared/data).
//
//	REGRESSD_SUITE=/work/shared/data go test -run TestSuite -v ./gpu/
func TestSuite(t *testing.T) {
	dir := os.Getenv("REGRESSD_SUITE")
	if dir == "" {
		t.Skip("set REGRESSD_SUITE to a dataset folder to run the suite")
	}
	model := os.Getenv("REGRESSD_MODEL")
	if model == "" {
		model = DefaultModel
	}
	ds, err := eval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(policy string) eval.Result {
		var p Policy
		if policy != "" {
			p, _ = ParsePolicy([]byte(policy))
		}
		res, err := eval.Run(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error) {
			opts := []Option{WithQueryBatch(8)}
			if policy != "" {
				opts = append(opts, WithPolicy(p))
			}
			r, err := NewRegressor(model, opts...)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			if err := r.Fit(context.Background(), X, y); err != nil {
				return nil, err
			}
			out, err := r.Predict(context.Background(), Xq)
			if want := map[string]string{"": RungResidentBF16, `"max_context"`: RungResidentInt8}[policy]; err == nil && r.MemoryReport().Rung != want {
				return nil, fmt.Errorf("rung %s, want %s", r.MemoryReport().Rung, want)
			}
			return out, err
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	bf := run("")
	i8 := bf
	if os.Getenv("REGRESSD_INT8") != "0" {
		i8 = run(`"max_context"`)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-16s %8s %8s %10s\n", "dataset", "bf16 R²", "int8 R²", "ΔR²")
	for k, d := range bf.Datasets {
		fmt.Fprintf(&b, "%-16s %8.4f %8.4f %10.2e\n", d.Name, d.R2, i8.Datasets[k].R2, i8.Datasets[k].R2-d.R2)
	}
	fmt.Fprintf(&b, "%-16s %8.4f %8.4f %10.2e\n", "suite mean", bf.SuiteMeanR2, i8.SuiteMeanR2, i8.SuiteMeanR2-bf.SuiteMeanR2)
	t.Log(model, b.String())
}
