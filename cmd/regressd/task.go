package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// taskCommand shows a task's report through a running regressd's admin API.
type taskCommand struct {
	m      *Main
	client scheduler.Client
}

func (c *taskCommand) Synopsis() string {
	return "show a task's report (a group_by run's every series) on a running regressd"
}

func (c *taskCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("task")
	fs.StringVar(&c.client.Server, "server", envOr("REGRESSD_SERVER", "http://127.0.0.1:8181"), "regressd HTTP API, a URL or host:port (env REGRESSD_SERVER)")
	secretFlag(fs, &c.client.Token, "token", "REGRESSD_AUTH_TOKEN", "Bearer token when the server has REGRESSD_AUTH_TOKENS")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	if action != "show" {
		return usageErrorf("unknown task action %q; run 'regressd task -h'", action)
	}
	if len(rest) != 1 {
		return usageErrorf("task show takes one task id, got %d; run 'regressd task -h'", len(rest))
	}
	r, err := c.client.Run(ctx, rest[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return c.m.printJSON(r)
	}
	run := r.Run
	w := c.m.Stdout
	fmt.Fprintf(w, "task %s (trigger %s, %s)\nstatus: %s\n", run.TaskID, run.Trigger, run.Origin, run.Status)
	for _, l := range [][2]string{{"message", run.Message}, {"first failure", run.FirstFailure}} {
		if l[1] != "" {
			fmt.Fprintf(w, "%s: %s\n", l[0], l[1])
		}
	}
	fmt.Fprintf(w, "window: %s .. %s\nwritten: %d  skipped_existing: %d  batches: %d done, %d failed of %d\n",
		run.Start.Format("2006-01-02T15:04:05Z"), run.End.Format("2006-01-02T15:04:05Z"), run.Written, run.SkippedExisting,
		run.BatchesDone, run.BatchesFailed, run.Batches)
	if r.Series == nil {
		return nil
	}
	s := r.Series
	fmt.Fprintf(w, "series: %d (%d succeeded, %d skipped, %d failed)\n\n", s.Total, s.Succeeded, s.Skipped, s.Failed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TAGS\tSTATUS\tWRITTEN\tSKIPPED_EXISTING\tMESSAGE")
	for _, sr := range r.SeriesResults {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", schemas.FormatTags(sr.Tags), sr.Status, sr.Written, sr.SkippedExisting, sr.Message)
	}
	return tw.Flush()
}
