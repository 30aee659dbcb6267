package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
)

// Config configures a Scheduler.
type Config struct {
	// ServiceKey is the model-service key for scheduled runs, from
	// SERVICE_API_KEY in the server's environment. Never from arguments.
	ServiceKey string
	// AuthTokens enable regressd's own request authorization (Bearer).
	AuthTokens []string
	// Models checks model slugs; nil accepts any well-formed slug.
	Models ModelCheck
	// Tables checks, when a trigger is created, that the table and the
	// columns its arguments name exist and fit. nil skips the check (a
	// scheduler without a database); every run checks again in the producer.
	Tables TableCheck
	// ConfigDir is the directory config_file_path names files in (the
	// plugin's PLUGIN_DIR). Empty: triggers cannot use config files.
	ConfigDir string
	// Tasks reads a task's summary from the ledger once the task bucket has
	// let it expire. nil: tasks are known for the bucket's TTL only.
	Tasks TaskLookup
	// Sealer seals the service key for the bus. Required.
	Sealer *schemas.Sealer
	// KeyTTL is how long a sealed key opens. Default 1h.
	KeyTTL time.Duration
	// WaitTimeout bounds how long an engine call waits for its task before
	// answering 202 with the task id. Default 10 minutes.
	WaitTimeout time.Duration
	Logger      *slog.Logger
	// Metrics records schedule ticks and runs; nil records nothing.
	Metrics *metrics.Metrics
	// Tracing starts each task's trace and carries it in the job's
	// headers; nil traces nothing.
	Tracing *tracing.Provider
}

// originWebhook is the origin of an engine request's job.
const originWebhook = "webhook"

// Scheduler serves the engine endpoint and the admin API and fires schedules.
type Scheduler struct {
	cfg   Config
	store *Store
	pub   *Publisher
	log   *slog.Logger

	mu      sync.Mutex
	entries map[string]*scheduled // by trigger name
	// fires are the goroutines that follow scheduled runs; Run joins them.
	fires sync.WaitGroup

	// When Run ends, engine calls still waiting answer 202 with their task
	// id rather than lose the caller: stopping is set and every wait in
	// waits is cancelled.
	stopping atomic.Bool
	waitMu   sync.Mutex
	waits    map[*context.CancelFunc]struct{}
}

type scheduled struct {
	id      cron.EntryID
	running atomic.Pointer[string] // task id of the run under way
}

// New binds the trigger bucket, the task bucket and the jobs stream.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Scheduler, error) {
	if cfg.Sealer == nil {
		return nil, errors.New("scheduler: no sealer")
	}
	if cfg.KeyTTL == 0 {
		cfg.KeyTTL = time.Hour
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	store, err := OpenStore(ctx, js)
	if err != nil {
		return nil, err
	}
	pub, err := NewPublisher(ctx, js, cfg.Tasks, cfg.Logger)
	if err != nil {
		return nil, err
	}
	pub.Tracing = cfg.Tracing
	return &Scheduler{cfg: cfg, store: store, pub: pub, log: cfg.Logger, entries: map[string]*scheduled{},
		waits: map[*context.CancelFunc]struct{}{}}, nil
}

// Store is the trigger registry.
func (s *Scheduler) Store() *Store { return s.store }

// Publisher publishes jobs and reads task summaries.
func (s *Scheduler) Publisher() *Publisher { return s.pub }

// submit seals the key and publishes a job: a request's with
// PublishRequest, any other's with Publish.
func (s *Scheduler) submit(ctx context.Context, trigger string, args schemas.RunArgs, start, end time.Time, dryRun bool, origin, key string) (string, error) {
	job := schemas.Job{Trigger: trigger, Args: args, Start: start, End: end, DryRun: dryRun,
		Origin: origin, Requested: time.Now().UTC(), KeyID: s.cfg.Sealer.KeyID(key),
		Seal: func(taskID string) (string, error) { return s.cfg.Sealer.Seal(key, taskID, s.cfg.KeyTTL) }}
	// The task's trace starts here; the job's headers carry it on.
	ctx, span := s.cfg.Tracing.Start(ctx, "regressd.task", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.AttrTrigger.String(trigger), tracing.AttrOrigin.String(origin)))
	defer span.End()
	publish := func() (string, bool, error) { return s.pub.Publish(ctx, job, "") }
	if origin == originWebhook {
		publish = func() (string, bool, error) { return s.pub.PublishRequest(ctx, job) }
	}
	taskID, dup, err := publish()
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return "", err
	}
	span.SetAttributes(tracing.AttrTaskID.String(taskID))
	s.taskLog(taskID).Info("job queued", "trigger", trigger, "origin", origin, "window_start", start, "window_end", end, "dry_run", dryRun, "duplicate", dup)
	return taskID, nil
}

// Run fires scheduled triggers until ctx ends, following changes to the
// trigger bucket as they happen, and watches the task bucket for the engine
// calls waiting on their tasks. It returns once every goroutine it started
// has; engine calls still waiting then answer 202.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.shutdown()
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		s.pub.Watch(ctx)
	}()
	defer watch.Wait()
	c := cron.New(cron.WithLocation(time.UTC), cron.WithParser(cronParser))
	c.Start()
	defer func() {
		<-c.Stop().Done() // no tick runs any more: no fire adds to s.fires
		s.fires.Wait()
	}()
	w, err := s.store.Watch(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("trigger watcher closed")
			}
			if e == nil {
				continue // initial values delivered
			}
			s.apply(ctx, c, e)
		}
	}
}

func (s *Scheduler) apply(ctx context.Context, c *cron.Cron, e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := e.Key()
	if old, ok := s.entries[name]; ok {
		c.Remove(old.id)
		delete(s.entries, name)
	}
	scheduledNow := false
	defer func() {
		if !scheduledNow {
			s.cfg.Metrics.ForgetSchedule(name)
		}
	}()
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	var t Trigger
	if err := json.Unmarshal(e.Value(), &t); err != nil || t.Disabled {
		return
	}
	ps, err := ParseSpec(t.Spec)
	if err != nil || ps.Kind == SpecRequest {
		return
	}
	// Inline arguments that cannot run are refused now; a config file is
	// read at every tick, so that a fix of the file takes effect.
	if _, fromFile, err := s.resolveTrigger(t); err != nil && !fromFile {
		s.log.Warn("scheduled trigger has invalid arguments; not scheduled", "trigger", t.Name, "err", err)
		return
	}
	ent := &scheduled{}
	ent.id = c.Schedule(ps.Schedule, cron.FuncJob(func() {
		// The tick may come before Schedule has returned the id: apply
		// holds s.mu until ent.id is set.
		s.mu.Lock()
		id := ent.id
		s.mu.Unlock()
		s.fire(ctx, t, fireTime(c, id), &ent.running)
	}))
	s.entries[name] = ent
	now := time.Now()
	next := ps.Schedule.Next(now)
	s.cfg.Metrics.SetSchedule(name, ps.Schedule.Next(next).Sub(next), now)
	scheduledNow = true
	s.log.Info("trigger scheduled", "trigger", t.Name, "spec", t.Spec)
}

// resolveTrigger is the run a trigger's own arguments (or config file)
// ask for; fromFile says they come from a config file.
func (s *Scheduler) resolveTrigger(t Trigger) (run Run, fromFile bool, err error) {
	args, fromFile, err := ExpandArgs(t.Args, s.cfg.ConfigDir)
	if err != nil {
		return run, fromFile, err
	}
	run, err = ResolveRun(args, false, s.cfg.Models)
	return run, fromFile, err
}

// fire publishes one scheduled run. A run still under way when the next tick
// comes makes that tick a skip, counted. A trigger's start_time and end_time
// fix its window: every tick then asks for the same rows, and with
// skip_existing a tick after the backfill calls no model.
func (s *Scheduler) fire(ctx context.Context, t Trigger, fireTime time.Time, running *atomic.Pointer[string]) {
	name := t.Name
	if prev := running.Load(); prev != nil {
		s.cfg.Metrics.ScheduleTick(true)
		s.log.Info("tick skipped: previous run still in progress", "trigger", name, "task_id", *prev)
		return
	}
	run, _, err := s.resolveTrigger(t)
	if err != nil {
		s.log.Error("scheduled run not queued: the trigger's arguments cannot run", "trigger", name, "err", err)
		return
	}
	start, end, err := ResolveWindow(run.Start, run.End, time.Duration(run.Args.Window), fireTime)
	if err != nil {
		s.log.Error("scheduled run not queued", "trigger", name, "err", err)
		return
	}
	s.cfg.Metrics.ScheduleTick(false)
	taskID, err := s.submit(ctx, name, run.Args, start, end, run.DryRun, "schedule", s.cfg.ServiceKey)
	if err != nil {
		s.log.Error("scheduled run not queued", "trigger", name, "err", err)
		return
	}
	// The run is under way until its summary says it ended: watched here,
	// as it happens, rather than read at the next tick, when a short-lived
	// summary may have expired.
	running.Store(&taskID)
	s.fires.Add(1)
	go func() {
		defer s.fires.Done()
		if sum, err := s.pub.Wait(ctx, taskID); err == nil {
			running.CompareAndSwap(&taskID, nil)
			if sum.Status != schemas.StatusFailed {
				s.cfg.Metrics.ScheduleSucceeded(name, fireTime)
			}
		}
	}()
}

// fireTime is the scheduled time of the tick being run, so that two
// schedulers firing the same tick publish the same window (and dedupe).
// cron sets the entry's Prev before it answers Entry, so Prev is this tick.
func fireTime(c *cron.Cron, id cron.EntryID) time.Time {
	if prev := c.Entry(id).Prev; !prev.IsZero() {
		return prev.UTC()
	}
	return time.Now().UTC().Truncate(time.Second)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// shutdown answers the engine calls still waiting: their waits end now.
func (s *Scheduler) shutdown() {
	s.stopping.Store(true)
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for cancel := range s.waits {
		(*cancel)()
	}
}

// waitContext is ctx bounded by timeout and by the scheduler's shutdown.
func (s *Scheduler) waitContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.stopping.Load() {
		cancel()
	}
	s.waits[&cancel] = struct{}{}
	return wctx, func() {
		s.waitMu.Lock()
		delete(s.waits, &cancel)
		s.waitMu.Unlock()
		cancel()
	}
}
