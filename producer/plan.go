package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// A task's plan (its meta and every batch, encoded as published) is stored
// in the context object store before the first batch is published. A job
// delivered again because the producer died before acking it publishes the
// stored plan again instead of planning anew: a new plan would see the
// predictions the first batches already wrote (skip_existing), cut different
// batches under the same message ids, and JetStream's dedupe would drop them.
// Re-publishing the same batches is a no-op for those already sent. Once
// the job is acked the plan is forgotten (bus.Objects.Forget), leaving
// nothing behind per task.
//
// The object's body is the batches' message bodies, each preceded by its
// length as a uvarint.

// planMetaKey holds the plan's TaskMeta (JSON) in the object's metadata.
const planMetaKey = "task"

// storedPlan returns the plan stored for a task; info is nil when there is none.
func (p *Producer) storedPlan(ctx context.Context, taskID string) (meta schemas.TaskMeta, bodies [][]byte, info *jetstream.ObjectInfo, err error) {
	res, err := p.obj.Get(ctx, schemas.PlanObject(taskID))
	if bus.IsNotFound(err) {
		return meta, nil, nil, nil
	}
	if err != nil {
		return meta, nil, nil, fmt.Errorf("read plan: %w", err)
	}
	defer res.Close()
	if info, err = res.Info(); err != nil {
		return meta, nil, nil, fmt.Errorf("read plan: %w", err)
	}
	if err := json.Unmarshal([]byte(info.Metadata[planMetaKey]), &meta); err != nil {
		return meta, nil, nil, fmt.Errorf("read plan: meta: %w", err)
	}
	body, err := io.ReadAll(res)
	if err != nil {
		return meta, nil, nil, fmt.Errorf("read plan: %w", err)
	}
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || n > uint64(len(body)-k) {
			return meta, nil, nil, fmt.Errorf("read plan: malformed after %d batches", len(bodies))
		}
		bodies = append(bodies, body[k:k+int(n)])
		body = body[k+int(n):]
	}
	if len(bodies) != meta.Batches {
		return meta, nil, nil, fmt.Errorf("read plan: %d batches stored, meta says %d", len(bodies), meta.Batches)
	}
	return meta, bodies, info, nil
}

// storePlan stores a task's batches, encoded as they will be published.
func (p *Producer) storePlan(ctx context.Context, meta schemas.TaskMeta, hdr []byte, bodies [][]byte) (*jetstream.ObjectInfo, error) {
	size := 0
	for _, b := range bodies {
		size += binary.MaxVarintLen64 + len(b)
	}
	buf := make([]byte, 0, size)
	for _, b := range bodies {
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	info, err := p.obj.Put(ctx, jetstream.ObjectMeta{Name: schemas.PlanObject(meta.TaskID),
		Metadata: map[string]string{planMetaKey: string(hdr)}}, bytes.NewReader(buf))
	if err != nil {
		return nil, fmt.Errorf("store plan: %w", err)
	}
	return info, nil
}

// publishBatches publishes a task's encoded batches in order.
func (p *Producer) publishBatches(ctx context.Context, meta schemas.TaskMeta, hdr []byte, bodies [][]byte) error {
	for b, body := range bodies {
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

// resumePlan publishes a stored plan again; plan is nil when none is stored.
func (p *Producer) resumePlan(ctx context.Context, job schemas.Job, log *slog.Logger) (plan *jetstream.ObjectInfo, err error) {
	meta, bodies, info, err := p.storedPlan(ctx, job.TaskID)
	if err != nil || info == nil || meta.Batches <= 0 {
		return nil, err
	}
	hdr, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	log.Info("job delivered again: publishing its stored plan", "batches", meta.Batches)
	return info, p.publishBatches(ctx, meta, hdr, bodies)
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
