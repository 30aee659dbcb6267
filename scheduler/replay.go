package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// Replay planning: the windows a backfill runs, from the jobs stream's
// history or cut from a time range, and running them through a Publisher.

// ReplayWindow is one window a replay runs, and how its task went.
type ReplayWindow struct {
	Job schemas.Job
	// Seq is the REGRESS_JOBS sequence the job came from; 0 for a window
	// cut from a range.
	Seq     uint64
	TaskID  string
	Summary schemas.TaskSummary
	// Err is why the window did not run or was not waited for to its end.
	Err error
}

// HistorySpan selects past jobs: published at or after Since, or from the
// stream sequence FromSeq on, and before Until when it is not zero.
type HistorySpan struct {
	Since   time.Time
	FromSeq uint64
	Until   time.Time
}

// CheckReplayable refuses a trigger that does not exist or is disabled, as
// the engine endpoint does (404, 409). Past jobs carry the arguments they
// ran with, so replay could run a deleted trigger's jobs; it does not,
// because running a trigger nobody can see or switch off is not what an
// operator who deleted or disabled it asked for. history says the replay
// reads past jobs.
func CheckReplayable(ctx context.Context, js jetstream.JetStream, trigger string, history bool) error {
	store, err := OpenStore(ctx, js)
	if err != nil {
		return err
	}
	t, err := store.Get(ctx, trigger)
	switch {
	case errors.Is(err, ErrTriggerNotFound) && history:
		return fmt.Errorf("trigger %q: %w (see 'regressd trigger list'); replay runs only existing triggers: a deleted trigger's past jobs stay in %s, and creating it again lets replay run them with the arguments they ran with", trigger, err, schemas.StreamJobs)
	case err != nil:
		return fmt.Errorf("trigger %q: %w (see 'regressd trigger list')", trigger, err)
	case t.Disabled:
		return fmt.Errorf("trigger %q is disabled, and replay does not run a disabled trigger; enable it with 'regressd trigger enable %s'", trigger, trigger)
	}
	return nil
}

// HistoryWindows reads the trigger's past jobs with an ordered consumer, up
// to the stream's last sequence when it starts (never the jobs a replay
// publishes), each distinct window once (its latest job), oldest first.
// currentArgs runs them with the trigger's arguments of today instead of
// those they ran with. Dry runs and jobs this build cannot read are left out.
func HistoryWindows(ctx context.Context, js jetstream.JetStream, trigger string, span HistorySpan, currentArgs bool) ([]*ReplayWindow, error) {
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.SubjectJobs + schemas.SubjectToken(trigger)}}
	if !span.Since.IsZero() {
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &span.Since
	} else {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, span.FromSeq
	}
	str, err := js.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", schemas.StreamJobs, err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", schemas.StreamJobs, err)
	}
	last := info.State.LastSeq
	cons, err := str.OrderedConsumer(ctx, occ)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamJobs, err)
	}
	var current *schemas.RunArgs
	if currentArgs {
		args, err := TriggerRunArgs(ctx, js, trigger)
		if err != nil {
			return nil, err
		}
		current = &args
	}
	latest := map[string]*ReplayWindow{}
	err = bus.ReadAll(ctx, cons, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		if meta.Sequence.Stream > last || (!span.Until.IsZero() && !meta.Timestamp.Before(span.Until)) {
			return false // past what was there at the start, or past Until
		}
		job, err := schemas.DecodeJob(msg.Data())
		if err != nil || job.DryRun || !job.Start.Before(job.End) {
			return true // not a job that wrote anything, or not one we can read
		}
		if current != nil {
			job.Args = *current
		}
		argKey, _ := json.Marshal(job.Args)
		key := job.Start.UTC().String() + "|" + job.End.UTC().String() + "|" + string(argKey)
		latest[key] = &ReplayWindow{Job: job, Seq: meta.Sequence.Stream}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamJobs, err)
	}
	windows := make([]*ReplayWindow, 0, len(latest))
	for _, w := range latest {
		windows = append(windows, w)
	}
	slices.SortFunc(windows, func(a, b *ReplayWindow) int {
		if c := a.Job.Start.Compare(b.Job.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return windows, nil
}

// maxRangeWindows bounds the windows a range is cut into.
const maxRangeWindows = 100_000

// RangeWindows cuts [start, end) into windows of step (the trigger's window
// argument when 0), run with the trigger's arguments.
func RangeWindows(ctx context.Context, js jetstream.JetStream, trigger string, start, end time.Time, step time.Duration) ([]*ReplayWindow, error) {
	if !start.Before(end) {
		return nil, fmt.Errorf("--start %s is not before --end %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	args, err := TriggerRunArgs(ctx, js, trigger)
	if err != nil {
		return nil, err
	}
	if step == 0 {
		step = time.Duration(args.Window)
	}
	if n := end.Sub(start) / step; n > maxRangeWindows {
		return nil, fmt.Errorf("--step %v cuts the range into %d windows; choose a longer step", step, n)
	}
	var windows []*ReplayWindow
	for s := start; s.Before(end); s = s.Add(step) {
		e := s.Add(step)
		if e.After(end) {
			e = end
		}
		windows = append(windows, &ReplayWindow{Job: schemas.Job{Trigger: trigger, Args: args, Start: s, End: e}})
	}
	return windows, nil
}

// TriggerRunArgs reads a trigger's arguments from the registry (or from
// its config file, under the directory REGRESSD_CONFIG_DIR names in this
// command's environment), complete: a request trigger that leaves some to
// the request body is refused.
func TriggerRunArgs(ctx context.Context, js jetstream.JetStream, trigger string) (schemas.RunArgs, error) {
	store, err := OpenStore(ctx, js)
	if err != nil {
		return schemas.RunArgs{}, err
	}
	t, err := store.Get(ctx, trigger)
	if err != nil {
		return schemas.RunArgs{}, fmt.Errorf("trigger %q: %w (see 'regressd trigger list')", trigger, err)
	}
	expanded, _, err := ExpandArgs(t.Args, os.Getenv(EnvConfigDir))
	if err != nil {
		return schemas.RunArgs{}, fmt.Errorf("trigger %q: %w", trigger, err)
	}
	args, err := ResolveArgs(expanded, false, nil)
	if err != nil {
		return schemas.RunArgs{}, fmt.Errorf("trigger %q's arguments cannot run a window on their own (a request trigger may leave some to the request body): %w", trigger, err)
	}
	return args, nil
}

// Replay runs windows as new tasks of one run.
type Replay struct {
	Trigger string
	// RunID makes the jobs new runs of their windows.
	RunID string
	// Parallel is the number of tasks in flight at once (at least 1).
	Parallel int
	// NoWait publishes every job without waiting for its task.
	NoWait bool
	// Seal seals the model-service key for one job's task, when it
	// starts, so the seal is fresh and opens for that task only.
	Seal func(taskID string) (string, error)
	// Done is told of each window once it finished or failed to start.
	Done func(*ReplayWindow)
}

// Run runs the windows, at most Parallel at once and never two whose
// windows overlap, each published when it starts, and watches pub's task
// bucket meanwhile. It returns when every window is done or ctx ends, its
// goroutines joined; a window not started says why in Err.
func (r Replay) Run(ctx context.Context, pub *Publisher, windows []*ReplayWindow) {
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		pub.Watch(wctx)
	}()
	defer watch.Wait()
	defer stopWatch()
	finished := make(chan *ReplayWindow)
	var running []*ReplayWindow
	pending := slices.Clone(windows)
	done := func(w *ReplayWindow) {
		if r.Done != nil {
			r.Done(w)
		}
	}
	start := func(w *ReplayWindow) {
		job := w.Job
		job.Trigger, job.DryRun, job.Origin, job.SealedKey, job.Requested = r.Trigger, false, "replay", "", time.Now().UTC()
		job.Seal = r.Seal
		if w.TaskID, _, w.Err = pub.Publish(ctx, job, r.RunID); w.Err != nil {
			return
		}
		if r.NoWait {
			w.Summary.Status = schemas.StatusRunning
			return
		}
		running = append(running, w)
		// Joined below: the loop waits for every running window.
		go func() {
			w.Summary, w.Err = pub.Wait(ctx, w.TaskID)
			finished <- w
		}()
	}
	for len(pending) > 0 || len(running) > 0 {
		for i := 0; i < len(pending) && len(running) < max(r.Parallel, 1) && ctx.Err() == nil; {
			w := pending[i]
			if overlapsAny(w, running) {
				i++
				continue
			}
			pending = slices.Delete(pending, i, i+1)
			start(w)
			if w.Err != nil || r.NoWait {
				done(w)
			}
		}
		if len(running) == 0 {
			if ctx.Err() != nil || len(pending) == 0 {
				break
			}
			continue
		}
		w := <-finished
		running = slices.DeleteFunc(running, func(x *ReplayWindow) bool { return x == w })
		done(w)
	}
	for _, w := range pending {
		w.Err = fmt.Errorf("not started: %v", ctx.Err())
	}
}

func overlapsAny(w *ReplayWindow, running []*ReplayWindow) bool {
	for _, r := range running {
		if w.Job.Start.Before(r.Job.End) && r.Job.Start.Before(w.Job.End) {
			return true
		}
	}
	return false
}
