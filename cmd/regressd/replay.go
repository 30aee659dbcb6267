package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

	trigger     string
	since       string
	fromSeq     uint64
	until       string
	start, end  string
	step        string
	dryRun      bool
	parallel    int
	currentArgs bool
	noWait      bool
	timeout     time.Duration
}

func (c *replayCommand) Synopsis() string {
	return "backfill: re-run a trigger's past jobs from REGRESS_JOBS, or the windows of a time range"
}

const replayUsage = `Usage:
  regressd replay --trigger T (--since TIME | --from-seq N) [--until TIME] [--dry-run]
  regressd replay --trigger T --start TIME --end TIME [--step DURATION] [--dry-run]

The first form reads the jobs trigger T published to REGRESS_JOBS (kept for
the backfill horizon, 90 days by default) from a time or a stream sequence on,
in order, and runs each distinct window again. The second splits [start, end)
into windows of --step (default: the trigger's window argument) and runs them,
for ranges that were never scheduled; it takes the trigger's arguments from
the trigger registry.

The trigger must exist and be enabled, as for the engine endpoint: a
disabled trigger is refused (enable it with 'regressd trigger enable T'), and
so is a deleted one (its past jobs stay in REGRESS_JOBS; create the trigger
again to replay them, with the arguments they ran with).

Re-runs are new tasks. With skip_existing (the default) a re-run pays for
nothing twice: rows that already have a prediction are skipped before the
model is called. Windows that overlap are never run at the same time, so none
is predicted twice by the replay itself. The model-service key comes from
SERVICE_API_KEY, sealed for the workers with REGRESSD_SECRET or the secret
under --data-dir, as the scheduler does for scheduled runs.

TIME is RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02), or a duration
ago (7d, 36h). Progress goes to stderr; the summary to stdout; the exit status
is 1 when a task failed.

Flags:
`

func (c *replayCommand) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	c.common.Existing = true
	c.common.registerDataDir(fs)
	c.common.registerBus(fs, false)
	fs.StringVar(&c.trigger, "trigger", "", "the trigger to replay (required)")
	fs.StringVar(&c.since, "since", "", "replay jobs published at or after TIME")
	fs.Uint64Var(&c.fromSeq, "from-seq", 0, "replay jobs from this REGRESS_JOBS stream sequence on")
	fs.StringVar(&c.until, "until", "", "with --since/--from-seq: only jobs published before TIME")
	fs.StringVar(&c.start, "start", "", "backfill windows from TIME (with --end)")
	fs.StringVar(&c.end, "end", "", "backfill windows up to TIME, exclusive (with --start)")
	fs.StringVar(&c.step, "step", "", "with --start/--end: window length (default: the trigger's window argument)")
	fs.BoolVar(&c.dryRun, "dry-run", false, "list the windows that would run; publish nothing")
	fs.IntVar(&c.parallel, "parallel", 4, "tasks in flight at once")
	fs.BoolVar(&c.currentArgs, "current-args", false, "re-run past jobs with the trigger's arguments of today instead of those they ran with")
	fs.BoolVar(&c.noWait, "no-wait", false, "publish every job and exit without waiting (overlapping windows may then run together)")
	fs.DurationVar(&c.timeout, "timeout", 0, "give up waiting after this long (0: wait until every task is done)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
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
	now := time.Now().UTC()
	history, err := c.validate()
	if err != nil {
		return err
	}
	if err := c.validateSpan(now); err != nil {
		return err
	}
	log := c.common.logger(c.m)
	st, err := pipeline.Open(ctx, c.common.Stores, "regressd-replay", true, false, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := scheduler.CheckReplayable(ctx, st.JS, c.trigger, history); err != nil {
		return err
	}
	var jobs []*scheduler.ReplayWindow
	var from string
	if history {
		span, text := c.span(now)
		from = text
		jobs, err = scheduler.HistoryWindows(ctx, st.JS, c.trigger, span, c.currentArgs)
	} else {
		jobs, err = c.fromRange(ctx, st.JS, now)
		from = rangeText(jobs)
	}
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		fmt.Fprintf(c.m.Stdout, "nothing to replay: no jobs of trigger %s %s\n", c.trigger, from)
		return nil
	}
	if c.dryRun {
		fmt.Fprintf(c.m.Stdout, "would re-run %d window(s) %s (trigger %s):\n", len(jobs), from, c.trigger)
		for _, j := range jobs {
			fmt.Fprintf(c.m.Stdout, "  [%s, %s)%s\n", j.Job.Start.Format(time.RFC3339), j.Job.End.Format(time.RFC3339), seqNote(j.Seq))
		}
		return nil
	}
	seal, err := c.keySealer(log)
	if err != nil {
		return err
	}
	pub, err := scheduler.NewPublisher(ctx, st.JS, nil, nil)
	if err != nil {
		return err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	rid := make([]byte, 4)
	rand.Read(rid)
	runID := "replay-" + now.Format("20060102T150405Z") + "-" + hex.EncodeToString(rid)
	began := time.Now()
	bar := progress.New(c.m.Stderr, "replay", len(jobs), 5*time.Second)
	written, failed := 0, 0
	done := func(w *scheduler.ReplayWindow) {
		written += w.Summary.Written
		if w.Err != nil || w.Summary.Status == schemas.StatusFailed {
			failed++
		}
		bar.Detail(fmt.Sprintf("%d rows written · %d failed", written, failed))
		bar.Add(1)
	}
	scheduler.Replay{Trigger: c.trigger, RunID: runID, Parallel: c.parallel, NoWait: c.noWait, Seal: seal, Done: done}.Run(ctx, pub, jobs)
	bar.Finish()
	return c.summarize(jobs, from, time.Since(began))
}

// span is the history the flags select, and its description.
func (c *replayCommand) span(now time.Time) (scheduler.HistorySpan, string) {
	var span scheduler.HistorySpan
	var from string
	if c.since != "" {
		span.Since, _ = scheduler.ParseWhen(c.since, now) // validated
		from = "published since " + span.Since.Format(time.RFC3339)
	} else {
		span.FromSeq = c.fromSeq
		from = fmt.Sprintf("from REGRESS_JOBS sequence %d", c.fromSeq)
	}
	if c.until != "" {
		span.Until, _ = scheduler.ParseWhen(c.until, now)
		from += " until " + span.Until.Format(time.RFC3339)
	}
	return span, from
}

// fromRange cuts --start/--end into windows of --step.
func (c *replayCommand) fromRange(ctx context.Context, js jetstream.JetStream, now time.Time) ([]*scheduler.ReplayWindow, error) {
	start, _ := scheduler.ParseWhen(c.start, now) // validated
	end, _ := scheduler.ParseWhen(c.end, now)
	var step time.Duration
	if c.step != "" {
		d, err := schemas.ParseDuration(c.step)
		if err != nil {
			return nil, fmt.Errorf("--step: %w", err)
		}
		step = time.Duration(d)
	}
	return scheduler.RangeWindows(ctx, js, c.trigger, start, end, step)
}

// validate checks the flag combination; history says which form it is.
func (c *replayCommand) validate() (history bool, err error) {
	var errs []error
	if c.trigger == "" {
		errs = append(errs, errors.New("--trigger is required"))
	}
	hist := c.since != "" || c.fromSeq > 0
	rng := c.start != "" || c.end != ""
	switch {
	case hist && rng:
		errs = append(errs, errors.New("give --since/--from-seq (past jobs) or --start/--end (new windows), not both"))
	case !hist && !rng:
		errs = append(errs, errors.New("say what to replay: --since TIME or --from-seq N (past jobs), or --start and --end (new windows)"))
	case c.since != "" && c.fromSeq > 0:
		errs = append(errs, errors.New("give --since or --from-seq, not both"))
	case rng && (c.start == "" || c.end == ""):
		errs = append(errs, errors.New("--start and --end go together"))
	}
	if c.until != "" && !hist {
		errs = append(errs, errors.New("--until goes with --since or --from-seq"))
	}
	if c.step != "" && !rng {
		errs = append(errs, errors.New("--step goes with --start and --end"))
	}
	if c.parallel < 1 {
		errs = append(errs, fmt.Errorf("--parallel %d: must be at least 1", c.parallel))
	}
	return hist, errors.Join(errs...)
}

// validateSpan parses the times given, so a bad one is reported before the
// bus is opened, and refuses a span that holds nothing: --until not after
// --since, --end not after --start.
func (c *replayCommand) validateSpan(now time.Time) error {
	check := func(fromFlag, from, toFlag, to string) error {
		var f, t time.Time
		var err error
		if from != "" {
			if f, err = scheduler.ParseWhen(from, now); err != nil {
				return fmt.Errorf("--%s %q: %w", fromFlag, from, err)
			}
		}
		if to != "" {
			if t, err = scheduler.ParseWhen(to, now); err != nil {
				return fmt.Errorf("--%s %q: %w", toFlag, to, err)
			}
		}
		if from != "" && to != "" && !f.Before(t) {
			return fmt.Errorf("--%s %s is not before --%s %s: the span holds nothing to replay", fromFlag, f.Format(time.RFC3339), toFlag, t.Format(time.RFC3339))
		}
		return nil
	}
	if err := check("since", c.since, "until", c.until); err != nil {
		return err
	}
	return check("start", c.start, "end", c.end)
}

// rangeText describes the windows a range was cut into: their length and
// the range ("of 24h in [start, end)").
func rangeText(jobs []*scheduler.ReplayWindow) string {
	if len(jobs) == 0 {
		return ""
	}
	first, last := jobs[0].Job, jobs[len(jobs)-1].Job
	return fmt.Sprintf("of %s in [%s, %s)", shortDuration(first.End.Sub(first.Start)),
		first.Start.Format(time.RFC3339), last.End.Format(time.RFC3339))
}

// shortDuration drops a duration's zero tail: 24h, 1h30m, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func seqNote(seq uint64) string {
	if seq == 0 {
		return ""
	}
	return fmt.Sprintf("  (job at REGRESS_JOBS sequence %d)", seq)
}

// summarize prints what the replay did; an error when a task failed.
func (c *replayCommand) summarize(jobs []*scheduler.ReplayWindow, from string, took time.Duration) error {
	counts := map[schemas.Status]int{}
	written, skippedRows := 0, 0
	var problems []string
	for _, j := range jobs {
		status := j.Summary.Status
		if j.Err != nil && !j.Summary.Done() {
			status = unfinished
		}
		counts[status]++
		written += j.Summary.Written
		skippedRows += j.Summary.SkippedExisting
		window := fmt.Sprintf("[%s, %s)", j.Job.Start.Format(time.RFC3339), j.Job.End.Format(time.RFC3339))
		switch {
		case status == unfinished:
			problems = append(problems, fmt.Sprintf("  %s %s: %v", orDash(j.TaskID), window, j.Err))
		case status == schemas.StatusFailed || status == schemas.StatusPartial:
			problems = append(problems, fmt.Sprintf("  %s %s %s: %s", j.TaskID, window, status, j.Summary.Message))
		}
	}
	w := c.m.Stdout
	fmt.Fprintf(w, "replayed trigger %s: %d window(s) %s; took %v\n", c.trigger, len(jobs), from, took.Round(time.Millisecond))
	var parts []string
	for _, s := range []schemas.Status{schemas.StatusSuccess, schemas.StatusSkipped, schemas.StatusPartial, schemas.StatusFailed, schemas.StatusRunning, unfinished} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
		}
	}
	fmt.Fprintf(w, "  %s\n  %d row(s) written; %d row(s) skipped as already predicted\n", strings.Join(parts, ", "), written, skippedRows)
	if c.noWait {
		fmt.Fprintln(w, "  --no-wait: tasks are running; follow them with GET /api/v3/engine/<trigger>/tasks/<task_id>")
		for _, j := range jobs {
			if j.TaskID != "" {
				fmt.Fprintf(w, "  %s [%s, %s)\n", j.TaskID, j.Job.Start.Format(time.RFC3339), j.Job.End.Format(time.RFC3339))
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if n := counts[schemas.StatusFailed] + counts[unfinished]; n > 0 {
		return fmt.Errorf("%d of %d replayed window(s) failed or did not finish", n, len(jobs))
	}
	return nil
}

// unfinished counts the windows whose task did not end while replay waited.
const unfinished schemas.Status = "unfinished"

// keySealer seals SERVICE_API_KEY for the workers with the roles' secret;
// without a key, jobs carry none (the built-in engine needs none; a hosted
// gateway will refuse them).
func (c *replayCommand) keySealer(log *slog.Logger) (func() (string, error), error) {
	key := os.Getenv("SERVICE_API_KEY")
	if key == "" {
		log.Warn("SERVICE_API_KEY is not set: replayed jobs carry no model-service key (fine for the built-in engine; a hosted gateway will refuse them)")
		return func() (string, error) { return "", nil }, nil
	}
	sealer, err := c.common.Sealer([]byte(os.Getenv("REGRESSD_SECRET")), false)
	if err != nil {
		return nil, fmt.Errorf("seal SERVICE_API_KEY: %w", err)
	}
	return func() (string, error) { return sealer.Seal(key, time.Hour) }, nil
}
