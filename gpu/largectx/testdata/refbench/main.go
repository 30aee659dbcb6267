// Command refbench times one request — Fit, then Predict — on the same
// synthetic table several ways, one after the other in one process: the
// engine of a reference commit with no large-context policy ("ref", built
// from git by ../refbench.sh), this tree's engine with no policy
// ("plain"), and this tree's engine under gpu/largectx with a policy
// ("policy"; default cluster_route), its windows fitted like one base, or
// each in full ("policy-full"). It is not part of the module: the
// script builds it in a temporary workspace.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"strings"
	"syscall"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/eval"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/gpu/largectx/largectxtest"

	ref "refbench/refgpu"
)

func main() {
	rows := flag.Int("rows", 100_000, "context rows")
	queries := flag.Int("queries", 1000, "query rows")
	features := flag.Int("features", 8, "features")
	model := flag.String("model", "regressd/model-4l", "model slug")
	sides := flag.String("sides", "ref,policy", "comma-separated: ref, plain, policy, policy-full")
	policy := flag.String("policy", `"cluster_route"`, "large_context_policy JSON")
	threshold := flag.Int64("threshold", 0, "large_context_threshold (0: default)")
	window := flag.Int("window", 0, "rows per internal call (0: default)")
	flag.Parse()

	X, y := largectxtest.Smooth(*rows, *features, 1)
	Xq, yq := largectxtest.Smooth(*queries, *features, 2)
	ctx := context.Background()
	for _, side := range strings.Split(*sides, ",") {
		cpu0, start := cpuSeconds(), time.Now()
		var pred []float64
		var note string
		switch side {
		case "ref":
			r, err := ref.NewRegressor(*model)
			check(err)
			check(r.Fit(X, y))
			pred, err = r.Predict(Xq)
			check(err)
			r.Close()
		case "plain":
			r, err := gpu.NewRegressor(*model)
			check(err)
			check(r.Fit(ctx, X, y))
			pred, err = r.Predict(ctx, Xq)
			check(err)
			r.Close()
		case "policy", "policy-full":
			var thr *int64
			if *threshold > 0 {
				thr = threshold
			}
			cfg, err := largectx.Parse(json.RawMessage(*policy), thr, nil)
			check(err)
			cfg.Window = *window
			cfg.FullFits = side == "policy-full"
			var rep largectx.Report
			pred, rep, err = largectx.Predict(ctx, cfg, func() (*gpu.Regressor, error) { return gpu.NewRegressor(*model) }, X, y, Xq)
			check(err)
			b, _ := json.Marshal(rep)
			note = " " + string(b)
		default:
			log.Fatalf("unknown side %q", side)
		}
		fmt.Printf("%-6s rows=%d queries=%d features=%d model=%s time=%.2fs cpu=%.2fs R²=%.4f%s\n",
			side, *rows, *queries, *features, *model, time.Since(start).Seconds(), cpuSeconds()-cpu0, eval.R2(yq, pred), note)
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// cpuSeconds is the CPU time this process has used, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
