package producer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// A task's plan (its meta and the timestamps of every batch's rows) is
// stored with its context, in the context object's metadata, before the
// first batch is published. A job delivered again because the producer died
// before acking it publishes the stored plan again instead of planning anew:
// a new plan would see the predictions the first batches already wrote
// (skip_existing), cut different batches under the same message ids, and
// JetStream's dedupe would drop them. The window is read again and the
// batches rebuilt from the stored timestamps; re-publishing a batch already
// sent is a no-op. The plan goes with the context (the writer forgets it
// once every batch is written), leaving nothing behind per task.
//
// The plan's body: uvarint batch count, then per batch its row count and
// its timestamps (µs) as zigzag varint deltas — a few bytes a row, base64
// in the metadata.

// Metadata keys of the context object: the plan's TaskMeta (JSON) and its
// batches.
const (
	planMetaKey    = "task"
	planBatchesKey = "plan"
)

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

// storedPlan returns the plan stored for a task; ok is false when there is
// none.
func (p *Producer) storedPlan(ctx context.Context, taskID string) (meta schemas.TaskMeta, batches [][]int64, ok bool, err error) {
	info, err := p.obj.GetInfo(ctx, schemas.ContextObject(taskID))
	if bus.IsNotFound(err) {
		return meta, nil, false, nil
	}
	if err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	plan, stored := info.Metadata[planBatchesKey]
	if !stored {
		return meta, nil, false, nil
	}
	if err := json.Unmarshal([]byte(info.Metadata[planMetaKey]), &meta); err != nil {
		return meta, nil, false, fmt.Errorf("read plan: meta: %w", err)
	}
	meta.ContextNUID, meta.ContextChunks = info.NUID, int(info.Chunks)
	body, err := base64.StdEncoding.DecodeString(plan)
	if err != nil {
		return meta, nil, false, fmt.Errorf("read plan: %w", err)
	}
	if batches, err = decodePlan(body); err != nil || len(batches) != meta.Batches {
		return meta, nil, false, fmt.Errorf("read plan: %d batches for meta's %d: %v", len(batches), meta.Batches, err)
	}
	return meta, batches, true, nil
}

// storeContext stores a task's context (body, an encoded record) with its
// plan: the meta (hdr, its JSON) and its batches' timestamps (encodePlan).
func (p *Producer) storeContext(ctx context.Context, taskID string, body []byte, hdr string, plan []byte) (*jetstream.ObjectInfo, error) {
	meta := jetstream.ObjectMeta{Name: schemas.ContextObject(taskID), Metadata: map[string]string{
		planMetaKey: hdr, planBatchesKey: base64.StdEncoding.EncodeToString(plan)}}
	if len(body) < defaultChunk {
		// Put allocates a whole chunk to read into: a smaller context needs
		// no more than itself.
		meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: uint32(max(len(body), 1))}
	}
	info, err := p.obj.Put(ctx, meta, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("store context: %w", err)
	}
	return info, nil
}

// publishBatches encodes and publishes a task's batches in order, then
// waits for every acknowledgement; hdr is the meta's JSON, every batch's
// task header.
func (p *Producer) publishBatches(ctx context.Context, meta schemas.TaskMeta, hdr string, w window, batches [][]int) error {
	acks := make([]jetstream.PubAckFuture, 0, len(batches))
	for b, rows := range batches {
		rec := w.queryRecord(meta.Features, rows)
		body, err := schemas.EncodeRecord(rec)
		rec.Release()
		if err != nil {
			return err
		}
		m := schemas.NewBatchMsg(meta.Trigger, hdr, b, body)
		p.cfg.Tracing.InjectMsg(ctx, m)
		ack, err := p.js.PublishMsgAsync(m, jetstream.WithMsgID(schemas.BatchMsgID(meta.TaskID, b)))
		if err != nil {
			return fmt.Errorf("publish batch %d: %w", b, err)
		}
		acks = append(acks, ack)
	}
	// An ack that never comes (a server restarting) fails the job, which
	// is delivered again and publishes its stored plan.
	timeout := time.NewTimer(publishTimeout)
	defer timeout.Stop()
	for b, ack := range acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return fmt.Errorf("publish batch %d: %w", b, err)
		case <-timeout.C:
			return fmt.Errorf("publish batch %d: no acknowledgement in %s", b, publishTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// defaultChunk is the object store's chunk size when none is given.
const defaultChunk = 128 << 10

// publishTimeout bounds the wait for a job's batches to be stored.
const publishTimeout = 30 * time.Second

// resumePlan publishes a stored plan again, its batches rebuilt from a
// fresh read of the window; resumed is false when none is stored. A row the
// source no longer has is left out of its batch. A table that no longer
// fits the job is a verdict, as when planning.
func (p *Producer) resumePlan(ctx context.Context, job schemas.Job, log *slog.Logger) (resumed bool, err error) {
	meta, stored, ok, err := p.storedPlan(ctx, job.TaskID)
	if err != nil || !ok || meta.Batches <= 0 {
		return false, err
	}
	var read schemas.TaskMeta
	w, _, release, err := p.readWindow(ctx, job, &read)
	if err != nil {
		return true, err
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
	hdr, err := schemas.EncodeTaskMeta(meta)
	if err != nil {
		return true, err
	}
	log.Info("job delivered again: publishing its stored plan", "batches", meta.Batches, "rows_gone", missing)
	return true, p.publishBatches(ctx, meta, hdr, w, batches)
}

// onDeadLetter settles the task of a job that was dead-lettered, so that
// whoever waits for it learns it failed.
func (p *Producer) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	job, err := schemas.DecodeJob(dl.Data)
	if job.TaskID == "" || err != nil && !errors.Is(err, schemas.ErrOtherVersion) {
		return nil // not a job of ours: there is no task to settle
	}
	ctx = p.cfg.Tracing.ExtractMsg(ctx, dl.Header)
	meta := schemas.TaskMeta{TaskID: job.TaskID, Trigger: job.Trigger, Measurement: job.Args.Measurement,
		Target: job.Args.Field, Model: job.Args.Model, Features: job.Args.FeatureFields, Start: job.Start,
		End: job.End, DryRun: job.DryRun, Origin: job.Origin, Requested: job.Requested}
	return p.publishVerdict(ctx, meta, &verdict{schemas.StatusFailed, http.StatusInternalServerError,
		"the job was dead-lettered (see 'regressd dlq list'): " + dl.Reason}, "verdict:dead-letter")
}
