package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/pipeline/demo"
	"github.com/regressd/regressd/scheduler"
)

// demoCommand runs the whole pipeline once on sample data with real gaps.
type demoCommand struct {
	m *Main
}

func (c *demoCommand) Synopsis() string {
	return "fill gaps in a sample weather table end to end (embedded NATS and PostgreSQL by default)"
}

func (c *demoCommand) Run(ctx context.Context, args []string) error {
	rc := &roleCommand{m: c.m, roles: []pipeline.Role{pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer}, name: "demo", synopsis: c.Synopsis()}
	fs := rc.flags()
	model := fs.String("model", gpu.DefaultModel, "built-in model to fill the gaps with (see 'regressd models')")
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q; run 'regressd demo -h'", fs.Arg(0))
	}
	// The demo's API listens on a free port so it never clashes with a
	// running regressd; its data lives in --data-dir like any run.
	rc.common.httpAddr = "127.0.0.1:0"
	if rc.common.logLevel == slog.LevelInfo {
		rc.common.logLevel = slog.LevelWarn
	}
	cfg, err := rc.config()
	if err != nil {
		return err
	}
	out := c.m.Stdout
	fmt.Fprintln(out, "regressd demo: starting NATS, PostgreSQL and every role …")
	began := time.Now()
	p, err := pipeline.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	rows, err := demo.Rows()
	if err != nil {
		return err
	}
	if err := demo.Load(ctx, p.Pool, rows); err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %s: %d daily rows (Seattle 2012–2015), temp_max blanked on %d days in runs of 1–7 days\n", demo.Table, len(rows), demo.Gaps(rows))
	client := &scheduler.Client{Server: p.URL()}
	if err := demo.CreateTrigger(ctx, client, *model); err != nil {
		return err
	}
	fmt.Fprintf(out, "trigger %s: request:%s, %s\n", demo.Table, demo.Table, demo.TriggerArgs(*model))

	// start_time alone reads [start, now): a new window, so a new job, each run.
	runStart := time.Now()
	status, answer, err := client.RunTrigger(ctx, demo.Table, "demo-key", map[string]string{"start_time": rows[0].Time.Format(time.RFC3339)})
	if err != nil {
		return fmt.Errorf("run demo trigger: %w", err)
	}
	fmt.Fprintf(out, "POST /api/v3/engine/%s → HTTP %d in %s\n%s\n", demo.Table, status, time.Since(runStart).Round(time.Millisecond), bytes.TrimSpace(answer))
	if status != http.StatusOK {
		return fmt.Errorf("demo run failed (HTTP %d)", status)
	}
	sc, err := demo.Read(ctx, p.Pool, rows, 8)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\nfirst predictions written to demo_weather_regressed (actual = the value the demo blanked):")
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "time\tpredicted\tactual\terror\tmodel\t")
	for _, p := range sc.Sample {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%+.1f\t%s\t\n", p.Time.UTC().Format("2006-01-02"), p.Predicted, p.Actual, p.Predicted-p.Actual, p.Model)
	}
	tw.Flush()
	fmt.Fprintf(out, "\n%d of %d gaps filled · MAE %.2f °C · RMSE %.2f °C · R² %.3f against the blanked truth · %s end to end\n",
		sc.Filled, sc.Gaps, sc.MAE, sc.RMSE, sc.R2, time.Since(began).Round(time.Millisecond))
	fmt.Fprintln(out, "The source table demo_weather was not modified; predictions live in demo_weather_regressed.")
	return nil
}
