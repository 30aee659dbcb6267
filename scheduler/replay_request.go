package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// ReplayRequest is what a backfill asks for, in the words of 'regressd
// replay': a trigger's past jobs (Since or FromSeq, up to Until) or the
// windows of a range never scheduled (Start to End, cut by Step). Times
// are as ParseWhen reads them; Step is a duration ("24h").
type ReplayRequest struct {
	Trigger          string
	Since, Until     string
	FromSeq          uint64
	Start, End, Step string
	CurrentArgs      bool
	Parallel         int
}

// History reports whether the request reads past jobs.
func (q ReplayRequest) History() bool { return q.Since != "" || q.FromSeq > 0 }

// Check reports what is wrong with the request, before anything is
// opened: every problem with the combination at once, then a time that
// does not parse or a span that holds nothing.
func (q ReplayRequest) Check(now time.Time) error {
	var errs []error
	if q.Trigger == "" {
		errs = append(errs, errors.New("--trigger is required"))
	}
	hist, rng := q.History(), q.Start != "" || q.End != ""
	switch {
	case hist && rng:
		errs = append(errs, errors.New("give --since/--from-seq (past jobs) or --start/--end (new windows), not both"))
	case !hist && !rng:
		errs = append(errs, errors.New("say what to replay: --since TIME or --from-seq N (past jobs), or --start and --end (new windows)"))
	case q.Since != "" && q.FromSeq > 0:
		errs = append(errs, errors.New("give --since or --from-seq, not both"))
	case rng && (q.Start == "" || q.End == ""):
		errs = append(errs, errors.New("--start and --end go together"))
	}
	if q.Until != "" && !hist {
		errs = append(errs, errors.New("--until goes with --since or --from-seq"))
	}
	if q.Step != "" && !rng {
		errs = append(errs, errors.New("--step goes with --start and --end"))
	}
	if q.Parallel < 1 {
		errs = append(errs, fmt.Errorf("--parallel %d: must be at least 1", q.Parallel))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, _, err := span("since", q.Since, "until", q.Until, now); err != nil {
		return err
	}
	_, _, err := span("start", q.Start, "end", q.End, now)
	return err
}

// span reads a pair of times, either of which may be absent, and refuses
// one that holds nothing.
func span(fromName, from, toName, to string, now time.Time) (f, t time.Time, err error) {
	if from != "" {
		if f, err = ParseWhen(from, now); err != nil {
			return f, t, fmt.Errorf("--%s %q: %w", fromName, from, err)
		}
	}
	if to != "" {
		if t, err = ParseWhen(to, now); err != nil {
			return f, t, fmt.Errorf("--%s %q: %w", toName, to, err)
		}
	}
	if from != "" && to != "" && !f.Before(t) {
		return f, t, fmt.Errorf("--%s %s is not before --%s %s: the span holds nothing to replay", fromName, f.Format(time.RFC3339), toName, t.Format(time.RFC3339))
	}
	return f, t, nil
}

// Windows checks the trigger (CheckReplayable) and plans the request's
// windows; desc says where they come from ("published since …", "of 24h
// in [start, end)"). The request must have passed Check.
func (q ReplayRequest) Windows(ctx context.Context, js jetstream.JetStream, now time.Time) (windows []*ReplayWindow, desc string, err error) {
	if err := CheckReplayable(ctx, js, q.Trigger, q.History()); err != nil {
		return nil, "", err
	}
	if !q.History() {
		start, end, _ := span("start", q.Start, "end", q.End, now)
		var step time.Duration
		if q.Step != "" {
			d, err := schemas.ParseDuration(q.Step)
			if err != nil {
				return nil, "", fmt.Errorf("--step: %w", err)
			}
			step = time.Duration(d)
		}
		windows, err = RangeWindows(ctx, js, q.Trigger, start, end, step)
		if len(windows) > 0 {
			first, last := windows[0].Job, windows[len(windows)-1].Job
			desc = fmt.Sprintf("of %s in [%s, %s)", shortDuration(first.End.Sub(first.Start)), first.Start.Format(time.RFC3339), last.End.Format(time.RFC3339))
		}
		return windows, desc, err
	}
	var hs HistorySpan
	hs.Since, hs.Until, _ = span("since", q.Since, "until", q.Until, now)
	if q.Since != "" {
		desc = "published since " + hs.Since.Format(time.RFC3339)
	} else {
		hs.FromSeq = q.FromSeq
		desc = fmt.Sprintf("from %s sequence %d", schemas.StreamJobs, q.FromSeq)
	}
	if q.Until != "" {
		desc += " until " + hs.Until.Format(time.RFC3339)
	}
	windows, err = HistoryWindows(ctx, js, q.Trigger, hs, q.CurrentArgs)
	return windows, desc, err
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

// ReplayUnfinished counts, in a ReplayTally, the windows whose task did
// not end while the replay waited (or that never started).
const ReplayUnfinished schemas.Status = "unfinished"

// ReplayTally is what a replay did.
type ReplayTally struct {
	// Counts are the windows by their task's status.
	Counts map[schemas.Status]int
	// Written and Skipped are rows written, and rows skipped as already
	// predicted.
	Written, Skipped int
	// Problems say, a line each, which windows failed or did not finish.
	Problems []string
}

// Tally adds up what the windows' tasks did.
func Tally(windows []*ReplayWindow) ReplayTally {
	t := ReplayTally{Counts: map[schemas.Status]int{}}
	for _, w := range windows {
		status := w.Summary.Status
		if w.Err != nil && !w.Summary.Done() {
			status = ReplayUnfinished
		}
		t.Counts[status]++
		t.Written += w.Summary.Written
		t.Skipped += w.Summary.SkippedExisting
		window := fmt.Sprintf("[%s, %s)", w.Job.Start.Format(time.RFC3339), w.Job.End.Format(time.RFC3339))
		switch status {
		case ReplayUnfinished:
			id := w.TaskID
			if id == "" {
				id = "-"
			}
			t.Problems = append(t.Problems, fmt.Sprintf("%s %s: %v", id, window, w.Err))
		case schemas.StatusFailed, schemas.StatusPartial:
			t.Problems = append(t.Problems, fmt.Sprintf("%s %s %s: %s", w.TaskID, window, status, w.Summary.Message))
		}
	}
	return t
}

// Failed counts the windows that failed or did not finish.
func (t ReplayTally) Failed() int { return t.Counts[schemas.StatusFailed] + t.Counts[ReplayUnfinished] }
