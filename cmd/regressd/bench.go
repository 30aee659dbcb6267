package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/regressd/regressd/bench"
)

// benchCommand measures the pipeline against the limits of PostgreSQL and
// against the in-database plugin's design, side by side in one run.
type benchCommand struct {
	m *Main
}

func (c *benchCommand) Synopsis() string {
	return "measure the pipeline against raw COPY, raw reads and a direct plugin-style loop"
}

func (c *benchCommand) Run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "engine" {
		return c.benchEngine(ctx, args[1:])
	}
	cfg := bench.DefaultConfig()
	var logLevel slog.Level
	var jsonOut bool
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.StringVar(&cfg.DataDir, "data-dir", "", "where the embedded NATS store and private PostgreSQL live; empty uses a temporary directory removed at exit")
	secretFlag(fs, &cfg.DatabaseURL, "database-url", "REGRESSD_DATABASE_URL", "PostgreSQL URL; empty runs a private cluster. Tables regressd_bench_* are created and dropped")
	secretFlag(fs, &cfg.NATSURL, "nats-url", "REGRESSD_NATS_URL", "NATS URL(s); empty runs an embedded JetStream server. No other regressd may consume from it during the bench")
	fs.TextVar(&logLevel, "log-level", slog.LevelWarn, "log `level` of the roles: debug, info, warn or error")
	fs.BoolVar(&jsonOut, "json", false, "print one JSON object with every figure and ratio instead of the table")
	cfg.RegisterFlags(fs)
	fleets := fs.String("fleet", "1000x200,10000x50", "many-series runs, SERIESxROWS,…: one group_by run each beside one series of as many rows (empty skips them)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), help("bench"), bench.TrivialModel)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample: regressd bench --json > bench.json\n")
	}
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; run 'regressd bench -h'", fs.Arg(0))
	}
	var err error
	if cfg.Fleets, err = bench.ParseFleets(*fleets); err != nil {
		return err
	}
	cfg.Command = strings.Join(append([]string{"regressd", "bench"}, args...), " ")
	cfg.Logger = (&commonFlags{logLevel: logLevel}).logger(c.m)
	cfg.Progress = c.m.Stderr
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
		return rep.WriteJSON(c.m.Stdout)
	}
	rep.WriteTable(c.m.Stdout)
	return nil
}
