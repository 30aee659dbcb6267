package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// Publisher publishes jobs and reads task summaries.
type Publisher struct {
	js    jetstream.JetStream
	tasks jetstream.KeyValue
}

// NewPublisher binds the jobs stream and the task bucket.
func NewPublisher(ctx context.Context, js jetstream.JetStream) (*Publisher, error) {
	kv, err := js.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		return nil, fmt.Errorf("open task bucket: %w", err)
	}
	return &Publisher{js: js, tasks: kv}, nil
}

// Publish sends a job. The message id makes a second publish of the same
// trigger and window within the dedupe window a no-op: duplicate is true and
// the task id names the task already under way.
func (p *Publisher) Publish(ctx context.Context, job schemas.Job, runID string) (taskID string, duplicate bool, err error) {
	msgID := schemas.JobMsgID(job.Trigger, job.Args, job.Start, job.End, runID, job.DryRun)
	job.Schema = schemas.Version
	job.TaskID = schemas.TaskID(msgID)
	body, err := json.Marshal(job)
	if err != nil {
		return "", false, err
	}
	msg := &nats.Msg{Subject: schemas.SubjectJobs + schemas.SubjectToken(job.Trigger), Data: body, Header: nats.Header{}}
	msg.Header.Set(schemas.HeaderSchema, schemas.Version)
	msg.Header.Set(schemas.HeaderTask, job.TaskID)
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	if err != nil {
		return "", false, fmt.Errorf("publish job: %w", err)
	}
	return job.TaskID, ack.Duplicate, nil
}

// Task returns a task's summary; ok is false when there is none yet.
func (p *Publisher) Task(ctx context.Context, taskID string) (schemas.TaskSummary, bool, error) {
	e, err := p.tasks.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return schemas.TaskSummary{}, false, nil
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
	w, err := p.tasks.Watch(ctx, taskID)
	if err != nil {
		return schemas.TaskSummary{}, fmt.Errorf("watch task: %w", err)
	}
	defer w.Stop()
	var last schemas.TaskSummary
	// The watcher delivers the current value first, then updates; a periodic
	// read covers a watcher that missed an update across a reconnect.
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return last, errors.New("task watcher closed")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if err := json.Unmarshal(e.Value(), &last); err == nil && last.Done() {
				return last, nil
			}
		case <-tick.C:
			if s, ok, err := p.Task(ctx, taskID); err == nil && ok {
				last = s
				if s.Done() {
					return s, nil
				}
			}
		}
	}
}
