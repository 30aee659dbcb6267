package worker

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// onDeadLetter settles a dead-lettered batch of a real task as a failed
// batch, so the task still completes (partial, with the rows remaining)
// instead of waiting forever. A batch whose header cannot be read belongs to
// no task we know: the DLQ copy is all there is to do.
func (w *Worker) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	var meta schemas.TaskMeta
	if err := json.Unmarshal([]byte(dl.Header.Get(schemas.HeaderTask)), &meta); err != nil || meta.TaskID == "" {
		return nil
	}
	batchNo, err := strconv.Atoi(dl.Header.Get(schemas.HeaderBatch))
	if err != nil || batchNo < 0 || batchNo >= meta.Batches {
		return nil
	}
	rows := 0
	if rec, err := schemas.DecodeRecord(dl.Data, nil); err == nil {
		rows = int(rec.NumRows())
		rec.Release()
	}
	meta.SealedKey = ""
	hdr, _ := json.Marshal(meta)
	m := &nats.Msg{Subject: schemas.SubjectResults + schemas.SubjectToken(meta.Trigger), Header: nats.Header{}}
	m.Header.Set(schemas.HeaderSchema, schemas.Version)
	m.Header.Set(schemas.HeaderTask, string(hdr))
	m.Header.Set(schemas.HeaderBatch, strconv.Itoa(batchNo))
	m.Header.Set("Regressd-Rows", strconv.Itoa(rows))
	m.Header.Set(schemas.HeaderStatus, schemas.BatchFailed)
	m.Header.Set(schemas.HeaderMessage, "batch dead-lettered (see 'regressd dlq list'): "+dl.Reason)
	// Its own id, so that the batch's real result, should the batch be
	// retried from the DLQ, is not dropped as a duplicate of this one.
	_, err = w.js.PublishMsg(ctx, m, jetstream.WithMsgID(meta.TaskID+":"+strconv.Itoa(batchNo)+":dead-letter"))
	return err
}
