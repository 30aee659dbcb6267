package writer

// Task summaries in the task bucket, where the engine endpoint waits for
// them: a task's final state always, its progress now and then.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// progressEvery spaces the progress summaries of a running task.
const progressEvery = time.Second

// progressDue reports whether a task's summary should be published now, and
// if so notes the time: always when done (and the task is forgotten),
// otherwise once progressEvery has passed since this writer first saw the
// task or last published its progress. A task done within progressEvery
// costs one publication.
func (w *Writer) progressDue(taskID string, done bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if done {
		delete(w.progress, taskID)
		return true
	}
	now := time.Now()
	last, ok := w.progress[taskID]
	if ok && now.Sub(last) < progressEvery {
		return false
	}
	if len(w.progress) >= maxKnown {
		clear(w.progress) // tasks whose end another writer saw
	}
	w.progress[taskID] = now
	return ok
}

// publishSummary copies the task's ledger state into the task bucket, where
// the engine endpoint waits for it. Results of one task are written
// concurrently (several writers, or one writer's concurrency), so a summary
// read earlier may arrive later: it replaces the stored one only if it has
// seen more of the task, so the final state is never overwritten. A task's
// final state is always published; its progress at most once per
// progressEvery by this writer (each publication costs two round trips).
// status is the task's status after the result when known: a task known to
// be running has its ledger read only when its progress is due.
func (w *Writer) publishSummary(ctx context.Context, taskID string, status schemas.Status) (schemas.TaskSummary, error) {
	if status == statusCovered {
		return schemas.TaskSummary{TaskID: taskID}, nil
	}
	due := false
	if status == schemas.StatusRunning {
		// Known to be running: no need to read the ledger unless progress
		// is due.
		if !w.progressDue(taskID, false) {
			return schemas.TaskSummary{TaskID: taskID, Status: status}, nil
		}
		due = true
	}
	s, err := summary(ctx, w.pool, taskID)
	if err != nil {
		return s, err
	}
	if !due && !w.progressDue(taskID, s.Done()) {
		return s, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return s, err
	}
	for range 10 {
		err = w.putSummary(ctx, taskID, s, b)
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // raced with another writer: read again
		}
		if tooLarge(err) {
			s.Predictions = nil
			s.SeriesResults = trimSeries(s.SeriesResults)
			s.Message = strings.TrimSpace(s.Message + " (dry-run predictions too many to return; run with a smaller window)")
			b, _ = json.Marshal(s)
			continue
		}
		break
	}
	if err != nil {
		return s, fmt.Errorf("publish task summary: %w", err)
	}
	return s, nil
}

// tooLarge reports whether a summary was refused for its size: by the
// task bucket's largest value, or by the server's largest message.
func tooLarge(err error) bool {
	return errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) || errors.Is(err, nats.ErrMaxPayload)
}

// putSummary stores b unless the stored summary has seen as much of the
// task. Most tasks have none stored yet (progress is published only for
// tasks that run longer than progressEvery), so it tries to create first.
// ErrKeyExists means a race with another writer: call again.
func (w *Writer) putSummary(ctx context.Context, taskID string, s schemas.TaskSummary, b []byte) error {
	_, err := w.tasks.Create(ctx, taskID, b)
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return err
	}
	e, err := w.tasks.Get(ctx, taskID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return jetstream.ErrKeyExists // removed since: create again
	}
	if err != nil {
		return err
	}
	var old schemas.TaskSummary
	if json.Unmarshal(e.Value(), &old) == nil && !newer(s, old) {
		return nil
	}
	_, err = w.tasks.Update(ctx, taskID, b, e.Revision())
	return err
}

// newer reports whether summary s has seen more of its task than old.
func newer(s, old schemas.TaskSummary) bool {
	ps, po := s.BatchesDone+s.BatchesFailed, old.BatchesDone+old.BatchesFailed
	switch {
	case ps != po:
		return ps > po
	case s.Done() != old.Done():
		return s.Done()
	case s.Written != old.Written:
		return s.Written > old.Written // a running group_by run's series
	}
	return s.Status != old.Status || s.Message != old.Message
}
