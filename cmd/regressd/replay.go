package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/regressd/regressd/pipeline"
	"github.com/regressd/regressd/progress"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// replayCommand re-runs a trigger's past jobs, or new windows of a range,
// through the pipeline: the backfill.
type replayCommand struct {
	m      *Main
	common commonFlags
	req    scheduler.ReplayRequest

	dryRun  bool
	noWait  bool
	timeout time.Duration
}

func (c *replayCommand) Synopsis() string {
	return "backfill: re-run a trigger's past jobs from REGRESS_JOBS, or the windows of a time range"
}

func (c *replayCommand) flags() *flag.FlagSet {
	fs := c.m.flagSet("replay")
	c.common.Existing = true
	c.common.registerDataDir(fs)
	c.common.registerBus(fs, false)
	fs.StringVar(&c.req.Trigger, "trigger", "", "the trigger to replay (required)")
	fs.StringVar(&c.req.Since, "since", "", "replay jobs published at or after TIME")
	fs.Uint64Var(&c.req.FromSeq, "from-seq", 0, "replay jobs from this REGRESS_JOBS stream sequence on")
	fs.StringVar(&c.req.Until, "until", "", "with --since/--from-seq: only jobs published before TIME")
	fs.StringVar(&c.req.Start, "start", "", "backfill windows from TIME (with --end)")
	fs.StringVar(&c.req.End, "end", "", "backfill windows up to TIME, exclusive (with --start)")
	fs.StringVar(&c.req.Step, "step", "", "with --start/--end: window length (default: the trigger's window argument)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "list the windows that would run; publish nothing")
	fs.IntVar(&c.req.Parallel, "parallel", 4, "tasks in flight at once")
	fs.BoolVar(&c.req.CurrentArgs, "current-args", false, "re-run past jobs with the trigger's arguments of today instead of those they ran with")
	fs.BoolVar(&c.noWait, "no-wait", false, "publish every job and exit without waiting (overlapping windows may then run together)")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up waiting after this long (0: wait until every task is done)")
	return fs
}

func (c *replayCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q; run 'regressd replay -h'", fs.Arg(0))
	}
	bf, err := pipeline.OpenBackfill(ctx, c.common.Stores, c.req, time.Now().UTC(), c.common.logger(c.m))
	if err != nil {
		return err
	}
	defer bf.Close()
	windows, from := bf.Windows, bf.From
	out := c.m.Stdout
	if len(windows) == 0 {
		fmt.Fprintf(out, "nothing to replay: no jobs of trigger %s %s\n", c.req.Trigger, from)
		return nil
	}
	if c.dryRun {
		fmt.Fprintf(out, "would re-run %d window(s) %s (trigger %s):\n", len(windows), from, c.req.Trigger)
		for _, w := range windows {
			fmt.Fprintf(out, "  [%s, %s)", w.Job.Start.Format(time.RFC3339), w.Job.End.Format(time.RFC3339))
			if w.Seq > 0 {
				fmt.Fprintf(out, "  (job at REGRESS_JOBS sequence %d)", w.Seq)
			}
			fmt.Fprintln(out)
		}
		return nil
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	began := time.Now()
	bar := progress.New(c.m.Stderr, "replay", len(windows), 5*time.Second)
	written, failed := 0, 0
	done := func(w *scheduler.ReplayWindow) {
		written += w.Summary.Written
		if w.Err != nil || w.Summary.Status == schemas.StatusFailed {
			failed++
		}
		bar.Detail(fmt.Sprintf("%d rows written · %d failed", written, failed))
		bar.Add(1)
	}
	err = bf.Run(ctx, os.Getenv("SERVICE_API_KEY"), []byte(os.Getenv("REGRESSD_SECRET")), c.noWait, done)
	bar.Finish()
	if err != nil {
		return err
	}

	t := scheduler.Tally(windows)
	fmt.Fprintf(out, "replayed trigger %s: %d window(s) %s; took %v\n", c.req.Trigger, len(windows), from, time.Since(began).Round(time.Millisecond))
	var parts []string
	for _, s := range []schemas.Status{schemas.StatusSuccess, schemas.StatusSkipped, schemas.StatusPartial, schemas.StatusFailed, schemas.StatusRunning, scheduler.ReplayUnfinished} {
		if t.Counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, t.Counts[s]))
		}
	}
	fmt.Fprintf(out, "  %s\n  %d row(s) written; %d row(s) skipped as already predicted\n", strings.Join(parts, ", "), t.Written, t.Skipped)
	if c.noWait {
		fmt.Fprintln(out, "  --no-wait: tasks are running; follow them with GET /api/v3/engine/<trigger>/tasks/<task_id>")
		for _, w := range windows {
			if w.TaskID != "" {
				fmt.Fprintf(out, "  %s [%s, %s)\n", w.TaskID, w.Job.Start.Format(time.RFC3339), w.Job.End.Format(time.RFC3339))
			}
		}
	}
	for _, p := range t.Problems {
		fmt.Fprintln(out, "  "+p)
	}
	if n := t.Failed(); n > 0 {
		return fmt.Errorf("%d of %d replayed window(s) failed or did not finish", n, len(windows))
	}
	return nil
}
