package gpu_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/regressd/regressd/gpu"
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
		model = gpu.DefaultModel
	}
	ds, err := eval.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(policy string) eval.Result {
		var p gpu.Policy
		if policy != "" {
			p, _ = gpu.ParsePolicy([]byte(policy))
		}
		res, err := eval.Run(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error) {
			opts := []gpu.Option{gpu.WithQueryBatch(8)}
			if policy != "" {
				opts = append(opts, gpu.WithPolicy(p))
			}
			r, err := gpu.NewRegressor(model, opts...)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			if err := r.Fit(context.Background(), X, y); err != nil {
				return nil, err
			}
			out, err := r.Predict(context.Background(), Xq)
			if want := map[string]string{"": gpu.RungResidentBF16, `"max_context"`: gpu.RungResidentInt8}[policy]; err == nil && r.MemoryReport().Rung != want {
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

// TestAccuracyFloor runs the default model on the two datasets shipped in
// testdata/engine with their fixed splits. Predicting the mean scores R² ≈ 0;
// the floors sit just under the kNN baseline (airquality 0.706, auto_mpg
// 0.874) less a split-noise margin.
func TestAccuracyFloor(t *testing.T) {
	ds, err := eval.Load("../testdata/engine")
	if err != nil {
		t.Fatal(err)
	}
	floors := map[string]float64{"airquality": 0.65, "auto_mpg": 0.86}
	res, err := eval.Run(context.Background(), ds, func(X [][]float64, y []float64, Xq [][]float64) ([]float64, error) {
		r, err := gpu.NewRegressor(gpu.DefaultModel)
		if err != nil {
			return nil, err
		}
		if err := r.Fit(context.Background(), X, y); err != nil {
			return nil, err
		}
		return r.Predict(context.Background(), Xq)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Datasets {
		t.Logf("%s: R² %.4f RMSE %.4g", d.Name, d.R2, d.RMSE)
		if d.R2 < floors[d.Name] {
			t.Errorf("%s: R² %.4f below the floor %.2f", d.Name, d.R2, floors[d.Name])
		}
	}
}
