package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
)

// TaskLookup reads a task's summary from its durable record (the writer's
// ledger); ok is false when there is none.
type TaskLookup func(ctx context.Context, taskID string) (sum schemas.TaskSummary, ok bool, err error)

// staleRun is how long a run may go without news (its summary's Updated)
// before asking for its window again runs it again rather than waits on it.
const staleRun = time.Hour

// maxReruns bounds the runs of one window Publish follows, one lookup each;
// past it the next id is published whatever ran under it (a window asked
// for that often is better replayed).
const maxReruns = 64

// Publisher publishes jobs and reads task summaries. Summaries live in the
// task bucket for its TTL (the live view); older ones come from the lookup,
// when one is set.
type Publisher struct {
	js     jetstream.JetStream
	tasks  jetstream.KeyValue
	lookup TaskLookup
	log    *slog.Logger
	// dupWindow is the jobs stream's duplicate window.
	dupWindow time.Duration
	// Tracing carries the trace of the publishing context in every job's
	// headers; nil carries none.
	Tracing *tracing.Provider

	// One watcher of the whole task bucket (Watch) serves every Wait: a
	// watcher per call would be a consumer created and deleted on the
	// server per call.
	mu      sync.Mutex
	waiters map[string]map[chan schemas.TaskSummary]struct{}

	// accepted remembers the last maxAccepted tasks this publisher queued,
	// as running, until the writer has a record of them: a task is known
	// from the moment it is queued, however long its first batch takes.
	amu           sync.Mutex
	accepted      map[string]schemas.TaskSummary
	acceptedOrder []string
}

// maxAccepted bounds Publisher.accepted (about 200 bytes a task).
const maxAccepted = 10_000

// NewPublisher binds the jobs stream and the task bucket; lookup may be
// nil. Wait learns of a task's end at once while Watch runs, and within a
// few seconds otherwise.
func NewPublisher(ctx context.Context, js jetstream.JetStream, lookup TaskLookup, log *slog.Logger) (*Publisher, error) {
	kv, err := js.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		return nil, fmt.Errorf("open task bucket: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	jobs, err := js.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		return nil, fmt.Errorf("open jobs stream: %w", err)
	}
	return &Publisher{js: js, tasks: kv, lookup: lookup, log: log, dupWindow: jobs.CachedInfo().Config.Duplicates,
		waiters: map[string]map[chan schemas.TaskSummary]struct{}{}, accepted: map[string]schemas.TaskSummary{}}, nil
}

// Publish sends a job, or finds the run of the same window that answers it:
// duplicate is true and the task id names that run. The message id also
// makes JetStream drop a second publish within its duplicate window.
func (p *Publisher) Publish(ctx context.Context, job schemas.Job, runID string) (taskID string, duplicate bool, err error) {
	msgID := job.MsgID(runID)
	// A task id names one run of a window. While that run is under way, or
	// within the duplicate window after it ended, the same window asked for
	// again is that run (a retried webhook, two schedulers). Once it ended
	// longer ago, it is a new run (new gaps to fill, a partial run to
	// finish) whose id is derived from the ended run's, so callers asking at
	// once still publish one job: the chain of a window's runs is followed
	// to its last.
	for range maxReruns {
		sum, ok, err := p.run(ctx, schemas.TaskID(msgID))
		if err != nil {
			p.log.Warn("could not tell whether the window already ran; publishing it as asked", "task_id", schemas.TaskID(msgID), "err", err)
			break
		}
		if !ok {
			break // never ran: this is the run to publish
		}
		if !sum.Done() && time.Since(sum.Updated) < staleRun || sum.Done() && time.Since(sum.Updated) < p.dupWindow {
			return sum.TaskID, true, nil
		}
		msgID = job.MsgID(runID + "|after:" + sum.TaskID)
	}
	return p.publishAs(ctx, job, msgID)
}

// publishAs publishes job under msgID, its task named after it; duplicate
// is true when JetStream already had it.
func (p *Publisher) publishAs(ctx context.Context, job schemas.Job, msgID string) (taskID string, duplicate bool, err error) {
	job.TaskID = schemas.TaskID(msgID)
	if job.Seal != nil {
		if job.SealedKey, err = job.Seal(job.TaskID); err != nil {
			return "", false, fmt.Errorf("seal key: %w", err)
		}
	}
	msg, err := schemas.NewJobMsg(job)
	if err != nil {
		return "", false, err
	}
	p.Tracing.InjectMsg(ctx, msg)
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	if err != nil {
		return "", false, fmt.Errorf("publish job: %w", err)
	}
	if !ack.Duplicate {
		// Known as running from now on (polled, waited for), before the
		// writer has anything of it. Kept in this process, not in the task
		// bucket: a marker there would cost the writer two more round trips
		// per task to replace.
		p.remember(schemas.TaskSummary{TaskID: job.TaskID, Trigger: job.Trigger, Status: schemas.StatusRunning,
			Start: job.Start, End: job.End, Model: job.Args.Model, Updated: time.Now().UTC()})
	}
	return job.TaskID, ack.Duplicate, nil
}

// run is what Publish knows of a task's run: the ledger's record when there
// is a ledger (a task that ended is there for good), else the task bucket;
// then the tasks this publisher queued that have no record yet.
func (p *Publisher) run(ctx context.Context, taskID string) (schemas.TaskSummary, bool, error) {
	if p.lookup == nil {
		return p.Task(ctx, taskID)
	}
	return p.recorded(ctx, taskID)
}

// recorded is a task's summary from the lookup (the ledger), when there is
// one, else from the tasks this publisher queued.
func (p *Publisher) recorded(ctx context.Context, taskID string) (schemas.TaskSummary, bool, error) {
	if p.lookup != nil {
		if sum, ok, err := p.lookup(ctx, taskID); ok || err != nil {
			return sum, ok, err
		}
	}
	return p.queued(taskID)
}

// queued is a task this publisher queued, as running, for staleRun at most:
// without a ledger this process never learns how a task ended.
func (p *Publisher) queued(taskID string) (schemas.TaskSummary, bool, error) {
	p.amu.Lock()
	sum, ok := p.accepted[taskID]
	p.amu.Unlock()
	return sum, ok && time.Since(sum.Updated) < staleRun, nil
}

// remember keeps sum among the accepted tasks, forgetting the oldest.
func (p *Publisher) remember(sum schemas.TaskSummary) {
	p.amu.Lock()
	defer p.amu.Unlock()
	if _, ok := p.accepted[sum.TaskID]; !ok {
		p.acceptedOrder = append(p.acceptedOrder, sum.TaskID)
	}
	p.accepted[sum.TaskID] = sum
	if len(p.acceptedOrder) > maxAccepted {
		delete(p.accepted, p.acceptedOrder[0])
		p.acceptedOrder = p.acceptedOrder[1:]
	}
}

// Task returns a task's summary; ok is false when there is none yet. It
// reads the task bucket, then the lookup (the ledger), then the tasks this
// publisher queued.
func (p *Publisher) Task(ctx context.Context, taskID string) (schemas.TaskSummary, bool, error) {
	e, err := p.tasks.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return p.recorded(ctx, taskID)
	}
	if err != nil {
		return schemas.TaskSummary{}, false, err
	}
	var s schemas.TaskSummary
	if err := json.Unmarshal(e.Value(), &s); err != nil {
		return schemas.TaskSummary{}, false, fmt.Errorf("task %s: %w", taskID, err)
	}
	return s, true, nil
}

// Wait blocks until the task reaches a final status or ctx ends, in which
// case it returns the latest summary seen and ctx's error.
func (p *Publisher) Wait(ctx context.Context, taskID string) (schemas.TaskSummary, error) {
	ch := p.subscribe(taskID)
	defer p.unsubscribe(taskID, ch)
	var last schemas.TaskSummary
	// Read once after subscribing, as the task may have ended before, and
	// now and then, which covers a watcher that is restarting.
	poll := func() bool {
		s, ok, err := p.Task(ctx, taskID)
		if err == nil && ok {
			last = s
		}
		return last.Done()
	}
	if poll() {
		return last, nil
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case last = <-ch:
			if last.Done() {
				return last, nil
			}
		case <-tick.C:
			if poll() {
				return last, nil
			}
		}
	}
}

// subscribe registers a waiter for a task's summaries.
func (p *Publisher) subscribe(taskID string) chan schemas.TaskSummary {
	ch := make(chan schemas.TaskSummary, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiters[taskID] == nil {
		p.waiters[taskID] = map[chan schemas.TaskSummary]struct{}{}
	}
	p.waiters[taskID][ch] = struct{}{}
	return ch
}

func (p *Publisher) unsubscribe(taskID string, ch chan schemas.TaskSummary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiters[taskID], ch)
	if len(p.waiters[taskID]) == 0 {
		delete(p.waiters, taskID)
	}
}

// Watch follows every update of the task bucket until ctx ends and hands
// each summary to the waiters of its task, newest first: a waiter that has
// not taken the previous one gets this one instead. It restarts after a
// failure. The publisher's owner runs it.
func (p *Publisher) Watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := p.tasks.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			p.log.Warn("task watcher", "err", err)
			bus.Sleep(ctx, time.Second)
			continue
		}
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			p.mu.Lock()
			chans := p.waiters[e.Key()]
			if len(chans) == 0 {
				p.mu.Unlock()
				continue
			}
			var s schemas.TaskSummary
			if json.Unmarshal(e.Value(), &s) == nil {
				for ch := range chans {
					select {
					case <-ch:
					default:
					}
					ch <- s
				}
			}
			p.mu.Unlock()
		}
		w.Stop()
	}
}
