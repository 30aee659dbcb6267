package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/regressd/regressd/bench/engine"
)

// benchEngine runs 'regressd bench engine': the engine's phases beside a
// reference build, side by side in one run.
func (c *benchCommand) benchEngine(ctx context.Context, args []string) error {
	cfg := engine.DefaultConfig()
	var jsonOut bool
	rows, queries, feats := engine.Sizes(&cfg.Rows), engine.Sizes(&cfg.Queries), engine.Sizes(&cfg.Features)
	fs := flag.NewFlagSet("bench engine", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.Var(rows, "rows", "context rows per cell, comma-separated (the full grid: 1000,10000,100000)")
	fs.Var(queries, "queries", "query rows per cell, comma-separated (the full grid: 1000,10000)")
	fs.Var(feats, "features", "features per cell, comma-separated (the full grid: 8,32)")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "built-in model both sides run")
	fs.StringVar(&cfg.Ref, "ref", cfg.Ref, "reference commit, built from git")
	fs.StringVar(&cfg.RefBin, "ref-bin", "", "a reference driver already built (skips the build)")
	fs.BoolVar(&cfg.NoRef, "no-ref", false, "time this tree's engine alone")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of this tree's side to this file, for 'go tool pprof'")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object with every figure instead of the table")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), help("bench-engine"), engine.DefaultRef)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample: regressd bench engine --rows 1000,10000 --queries 1000 --features 8 --cpuprofile engine.pprof\n")
	}
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; run 'regressd bench engine -h'", fs.Arg(0))
	}
	cfg.Command = strings.Join(append([]string{"regressd", "bench", "engine"}, args...), " ")
	cfg.Progress = c.m.Stderr
	rep, err := engine.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
		return rep.WriteJSON(c.m.Stdout)
	}
	rep.WriteTable(c.m.Stdout)
	return nil
}
