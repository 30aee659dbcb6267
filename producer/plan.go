package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// A task's plan (its meta and every query row, in batch order) is stored in
// the context object store before the first batch is published. A job
// delivered again because the producer died before acking it publishes the
// stored plan again instead of planning anew: a new plan would see the
// predictions the first batches already wrote (skip_existing), cut different
// batches under the same message ids, and JetStream's dedupe would drop them.
// Re-publishing the same batches is a no-op for those already sent.

// planMetaKey holds the plan's TaskMeta (JSON) in the object's metadata.
const planMetaKey = "task"

func planName(taskID string) string { return "plan/" + taskID }

// storedPlan returns the plan stored for a task; ok is false when there is none.
func (p *Producer) storedPlan(ctx context.Context, taskID string) (meta schemas.TaskMeta, rec arrow.RecordBatch, ok bool, err error) {
	res, err := p.obj.Get(ctx, planName(taskID))
	if bus.IsNotFound(err) {
		return meta, nil, false, nil
	}
	if err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	if err := json.Unmarshal([]byte(info.Metadata[planMetaKey]), &meta); err != nil {
		return meta, nil, false, fmt.Errorf("read plan: meta: %w", err)
	}
	body, err := io.ReadAll(res)
	if err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	if rec, err = schemas.DecodeRecord(body, schemas.QuerySchema(meta.Features)); err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	return meta, rec, true, nil
}

// publishPlan stores the plan once, then publishes its batches.
func (p *Producer) publishPlan(ctx context.Context, meta schemas.TaskMeta, queries arrow.RecordBatch, batchSize int, store bool) error {
	hdr, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if store {
		body, err := schemas.EncodeRecord(queries)
		if err != nil {
			return err
		}
		if _, err := p.obj.Put(ctx, jetstream.ObjectMeta{Name: planName(meta.TaskID),
			Metadata: map[string]string{planMetaKey: string(hdr)}}, bytes.NewReader(body)); err != nil {
			return fmt.Errorf("store plan: %w", err)
		}
	}
	n := int(queries.NumRows())
	for b, lo := 0, 0; lo < n; b, lo = b+1, lo+batchSize {
		part := queries.NewSlice(int64(lo), int64(min(lo+batchSize, n)))
		body, err := schemas.EncodeRecord(part)
		part.Release()
		if err != nil {
			return err
		}
		m := &nats.Msg{Subject: schemas.SubjectBatches + schemas.SubjectToken(meta.Trigger), Data: body, Header: nats.Header{}}
		m.Header.Set(schemas.HeaderSchema, schemas.Version)
		m.Header.Set(schemas.HeaderTask, string(hdr))
		m.Header.Set(schemas.HeaderBatch, strconv.Itoa(b))
		if _, err := p.js.PublishMsg(ctx, m, jetstream.WithMsgID(meta.TaskID+":"+strconv.Itoa(b))); err != nil {
			return fmt.Errorf("publish batch %d: %w", b, err)
		}
	}
	return nil
}

// resumePlan publishes a stored plan again; done is false when none is stored.
func (p *Producer) resumePlan(ctx context.Context, job schemas.Job, log *slog.Logger) (done bool, err error) {
	meta, rec, ok, err := p.storedPlan(ctx, job.TaskID)
	if err != nil || !ok {
		return false, err
	}
	defer rec.Release()
	if meta.Batches <= 0 || job.Args.PredictBatchSize <= 0 {
		return false, nil
	}
	log.Info("job delivered again: publishing its stored plan", "batches", meta.Batches)
	return true, p.publishPlan(ctx, meta, rec, job.Args.PredictBatchSize, false)
}

// onDeadLetter settles the task of a job that was dead-lettered, so that
// whoever waits for it learns it failed.
func (p *Producer) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	var job schemas.Job
	if err := json.Unmarshal(dl.Data, &job); err != nil || job.TaskID == "" {
		return nil // not a job of ours: there is no task to settle
	}
	meta := schemas.TaskMeta{TaskID: job.TaskID, Trigger: job.Trigger, Measurement: job.Args.Measurement,
		Target: job.Args.Field, Model: job.Args.Model, Features: job.Args.FeatureFields, Start: job.Start,
		End: job.End, DryRun: job.DryRun, Origin: job.Origin}
	return p.publishVerdict(ctx, meta, &verdict{schemas.TaskFailed, http.StatusInternalServerError,
		"the job was dead-lettered (see 'regressd dlq list'): " + dl.Reason}, "verdict:dead-letter")
}
