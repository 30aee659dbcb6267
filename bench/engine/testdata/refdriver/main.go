// Command refdriver times a reference commit's engine (built from git as
// package refdriver/refgpu by bench/engine's RefBuild) on one cell of
// 'regressd bench engine': the same generated table and the same timed
// calls (engine.Measure) as this tree's side, printed as one JSON Timing.
// It is not part of the module: RefBuild builds it in a temporary
// workspace beside this tree.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"

	"github.com/regressd/regressd/bench/engine"

	ref "refdriver/refgpu"
)

type refEngine struct{ r *ref.Regressor }

func (e refEngine) Fit(X [][]float64, y []float64) error      { return e.r.Fit(X, y) }
func (e refEngine) Predict(Xq [][]float64) ([]float64, error) { return e.r.Predict(Xq) }
func (e refEngine) CacheBytes() int64                         { return e.r.MemoryReport().CacheBytes }
func (e refEngine) Close()                                    { e.r.Close() }

func main() {
	rows := flag.Int("rows", 1000, "context rows")
	queries := flag.Int("queries", 1000, "query rows")
	features := flag.Int("features", 8, "features")
	model := flag.String("model", "regressd/model-4l", "model slug")
	flag.Parse()
	X, y, Xq, yq := engine.Data(*rows, *queries, *features)
	r, err := ref.NewRegressor(*model)
	if err != nil {
		log.Fatal(err)
	}
	e := refEngine{r}
	defer e.Close()
	t, err := engine.Measure(e, X, y, Xq, yq)
	if err != nil {
		log.Fatal(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(t); err != nil {
		log.Fatal(err)
	}
}
