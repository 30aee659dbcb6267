package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
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

// A task's plan (its meta and the timestamps of every batch's rows) is
// stored in the context object store before the first batch is published.
// A job delivered again because the producer died before acking it
// publishes the stored plan again instead of planning anew: a new plan
// would see the predictions the first batches already wrote
// (skip_existing), cut different batches under the same message ids, and
// JetStream's dedupe would drop them. The window is read again and the
// batches rebuilt from the stored timestamps; re-publishing a batch already
// sent is a no-op. Once the job is acked the plan is forgotten
// (bus.Objects.Forget), leaving nothing behind per task.
//
// The object's body: uvarint batch count, then per batch its row count and
// its timestamps (µs) as zigzag varint deltas — a few bytes a row.

// planMetaKey holds the plan's TaskMeta (JSON) in the object's metadata.
const planMetaKey = "task"

// encodePlan writes the timestamps of every batch's rows.
func encodePlan(w window, batches [][]int) []byte {
	buf := binary.AppendUvarint(nil, uint64(len(batches)))
	var prev int64
	for _, rows := range batches {
		buf = binary.AppendUvarint(buf, uint64(len(rows)))
		for _, i := range rows {
			t := int64(w.times.Value(i))
			buf = binary.AppendVarint(buf, t-prev)
			prev = t
		}
	}
	return buf
}

// decodePlan reads what encodePlan wrote.
func decodePlan(b []byte) ([][]int64, error) {
	bad := errors.New("malformed plan")
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, bad
	}
	b = b[k:]
	out := make([][]int64, n)
	var prev int64
	for i := range out {
		m, k := binary.Uvarint(b)
		if k <= 0 || m > uint64(len(b)) {
			return nil, bad
		}
		b = b[k:]
		out[i] = make([]int64, m)
		for j := range out[i] {
			d, k := binary.Varint(b)
			if k <= 0 {
				return nil, bad
			}
			b = b[k:]
			prev += d
			out[i][j] = prev
		}
	}
	if len(b) != 0 {
		return nil, bad
	}
	return out, nil
}

// storedPlan returns the plan stored for a task; info is nil when there is none.
func (p *Producer) storedPlan(ctx context.Context, taskID string) (meta schemas.TaskMeta, batches [][]int64, info *jetstream.ObjectInfo, err error) {
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
	if batches, err = decodePlan(body); err != nil || len(batches) != meta.Batches {
		return meta, nil, nil, fmt.Errorf("read plan: %d batches for meta's %d: %v", len(batches), meta.Batches, err)
	}
	return meta, batches, info, nil
}

// storePlan stores a task's meta (hdr, its JSON) and its batches' timestamps.
func (p *Producer) storePlan(ctx context.Context, taskID string, hdr []byte, w window, batches [][]int) (*jetstream.ObjectInfo, error) {
	info, err := p.obj.Put(ctx, jetstream.ObjectMeta{Name: schemas.PlanObject(taskID),
		Metadata: map[string]string{planMetaKey: string(hdr)}}, bytes.NewReader(encodePlan(w, batches)))
	if err != nil {
		return nil, fmt.Errorf("store plan: %w", err)
	}
	return info, nil
}

// publishBatches encodes and publishes a task's batches in order; hdr is
// the meta's JSON, every batch's task header.
func (p *Producer) publishBatches(ctx context.Context, meta schemas.TaskMeta, hdr []byte, w window, batches [][]int) error {
	for b, rows := range batches {
		rec := w.queryRecord(meta.Features, rows)
		body, err := schemas.EncodeRecord(rec)
		rec.Release()
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

// resumePlan publishes a stored plan again, its batches rebuilt from a
// fresh read of the window; plan is nil when none is stored. A row the
// source no longer has is left out of its batch. A table that no longer
// fits the job is a verdict, as when planning.
func (p *Producer) resumePlan(ctx context.Context, job schemas.Job, log *slog.Logger) (plan *jetstream.ObjectInfo, err error) {
	meta, stored, info, err := p.storedPlan(ctx, job.TaskID)
	if err != nil || info == nil || meta.Batches <= 0 {
		return nil, err
	}
	var read schemas.TaskMeta
	w, _, release, err := p.readWindow(ctx, job, &read)
	if err != nil {
		return nil, err
	}
	defer release()
	at := make(map[int64]int, w.rows())
	for i := range w.rows() {
		at[int64(w.times.Value(i))] = i
	}
	batches := make([][]int, len(stored))
	missing := 0
	for b, times := range stored {
		for _, t := range times {
			if i, ok := at[t]; ok {
				batches[b] = append(batches[b], i)
			} else {
				missing++
			}
		}
	}
	hdr, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	log.Info("job delivered again: publishing its stored plan", "batches", meta.Batches, "rows_gone", missing)
	return info, p.publishBatches(ctx, meta, hdr, w, batches)
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
