package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// Where replay's windows come from: the jobs stream's history, or a range
// cut by the trigger's arguments; and the key they carry.

// parseWhen reads RFC 3339, a date, or a duration before now.
func parseWhen(flagName, s string, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if d, err := schemas.ParseDuration(s); err == nil {
		return now.Add(-time.Duration(d)), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration ago (7d)", flagName, s)
}

// fromHistory reads the trigger's past jobs with an ordered consumer, up to
// the stream's last sequence when it starts (never the jobs it publishes).
func (c *replayCommand) fromHistory(ctx context.Context, js jetstream.JetStream, now time.Time) ([]*replayJob, string, error) {
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{schemas.SubjectJobs + schemas.SubjectToken(c.trigger)}}
	from := ""
	if c.since != "" {
		t, err := parseWhen("since", c.since, now)
		if err != nil {
			return nil, "", err
		}
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
		from = "published since " + t.Format(time.RFC3339)
	} else {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.fromSeq
		from = fmt.Sprintf("from REGRESS_JOBS sequence %d", c.fromSeq)
	}
	var until time.Time
	if c.until != "" {
		t, err := parseWhen("until", c.until, now)
		if err != nil {
			return nil, "", err
		}
		until = t
		from += " until " + t.Format(time.RFC3339)
	}
	str, err := js.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", schemas.StreamJobs, err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", schemas.StreamJobs, err)
	}
	last := info.State.LastSeq
	cons, err := str.OrderedConsumer(ctx, occ)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", schemas.StreamJobs, err)
	}
	var trig *scheduler.Trigger
	var current schemas.RunArgs
	if c.currentArgs {
		if current, trig, err = c.triggerArgs(ctx, js); err != nil {
			return nil, "", err
		}
	}
	latest := map[string]*replayJob{}
	err = bus.ReadAll(ctx, cons, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		if meta.Sequence.Stream > last || (!until.IsZero() && !meta.Timestamp.Before(until)) {
			return false // past what was there at the start, or past --until
		}
		var job schemas.Job
		if json.Unmarshal(msg.Data(), &job) != nil || job.Schema != schemas.Version || job.DryRun || !job.Start.Before(job.End) {
			return true // not a job that wrote anything, or not one we can read
		}
		if trig != nil {
			job.Args = current
		}
		argKey, _ := json.Marshal(job.Args)
		key := job.Start.UTC().String() + "|" + job.End.UTC().String() + "|" + string(argKey)
		latest[key] = &replayJob{job: job, seq: meta.Sequence.Stream}
		return true
	})
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", schemas.StreamJobs, err)
	}
	jobs := make([]*replayJob, 0, len(latest))
	for _, j := range latest {
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool {
		if !jobs[a].job.Start.Equal(jobs[b].job.Start) {
			return jobs[a].job.Start.Before(jobs[b].job.Start)
		}
		return jobs[a].seq < jobs[b].seq
	})
	return jobs, from, nil
}

// fromRange splits [start, end) into windows of the trigger's arguments.
func (c *replayCommand) fromRange(ctx context.Context, js jetstream.JetStream, now time.Time) ([]*replayJob, string, error) {
	start, err := parseWhen("start", c.start, now)
	if err != nil {
		return nil, "", err
	}
	end, err := parseWhen("end", c.end, now)
	if err != nil {
		return nil, "", err
	}
	if !start.Before(end) {
		return nil, "", fmt.Errorf("--start %s is not before --end %s", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	args, _, err := c.triggerArgs(ctx, js)
	if err != nil {
		return nil, "", err
	}
	step := time.Duration(args.Window)
	if c.step != "" {
		d, err := schemas.ParseDuration(c.step)
		if err != nil {
			return nil, "", fmt.Errorf("--step: %w", err)
		}
		step = time.Duration(d)
	}
	if n := end.Sub(start) / step; n > 100000 {
		return nil, "", fmt.Errorf("--step %v cuts the range into %d windows; choose a longer step", step, n)
	}
	var jobs []*replayJob
	for s := start; s.Before(end); s = s.Add(step) {
		e := s.Add(step)
		if e.After(end) {
			e = end
		}
		jobs = append(jobs, &replayJob{job: schemas.Job{Trigger: c.trigger, Args: args, Start: s, End: e}})
	}
	return jobs, fmt.Sprintf("windows of %v in [%s, %s)", step, start.Format(time.RFC3339), end.Format(time.RFC3339)), nil
}

// triggerArgs reads the trigger's arguments from the registry, complete.
func (c *replayCommand) triggerArgs(ctx context.Context, js jetstream.JetStream) (schemas.RunArgs, *scheduler.Trigger, error) {
	store, err := scheduler.OpenStore(ctx, js)
	if err != nil {
		return schemas.RunArgs{}, nil, err
	}
	t, err := store.Get(ctx, c.trigger)
	if err != nil {
		return schemas.RunArgs{}, nil, fmt.Errorf("trigger %q: %w (see 'regressd trigger list')", c.trigger, err)
	}
	args, err := scheduler.ResolveArgs(t.Args, false, nil)
	if err != nil {
		return schemas.RunArgs{}, nil, fmt.Errorf("trigger %q's arguments cannot run a window on their own (a request trigger may leave some to the request body): %w", c.trigger, err)
	}
	return args, &t, nil
}

// keySealer seals SERVICE_API_KEY for the workers; without a key, jobs carry
// none (the built-in engine needs none; a hosted gateway will refuse them).
func (c *replayCommand) keySealer(st *stack) (func() (string, error), error) {
	key := os.Getenv("SERVICE_API_KEY")
	if key == "" {
		st.log.Warn("SERVICE_API_KEY is not set: replayed jobs carry no model-service key (fine for the built-in engine; a hosted gateway will refuse them)")
		return func() (string, error) { return "", nil }, nil
	}
	secret := []byte(os.Getenv("REGRESSD_SECRET"))
	if len(secret) == 0 {
		b, err := os.ReadFile(filepath.Join(c.common.dataDir, "secret"))
		if err != nil {
			return nil, fmt.Errorf("no deployment secret to seal SERVICE_API_KEY with: set REGRESSD_SECRET to the roles' value, or point --data-dir at theirs (%v)", err)
		}
		secret = b
	}
	sealer, err := schemas.NewSealer(secret)
	if err != nil {
		return nil, err
	}
	return func() (string, error) { return sealer.Seal(key, time.Hour) }, nil
}
