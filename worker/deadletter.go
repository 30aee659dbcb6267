package worker

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// onDeadLetter settles a dead-lettered batch of a real task as a failed
// batch, so the task still completes (partial, with the rows remaining)
// instead of waiting forever. A batch whose header cannot be read belongs to
// no task we know: the DLQ copy is all there is to do.
func (w *Worker) onDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	if schemas.IsPack(dl.Header) {
		return w.packDeadLetter(ctx, dl)
	}
	meta, batchNo, err := w.metas.DecodeBatch(dl.Header)
	if err != nil {
		return nil
	}
	rows := 0
	if rec, err := schemas.DecodeRecord(dl.Data, nil); err == nil {
		rows = int(rec.NumRows())
		rec.Release()
	}
	m, err := schemas.NewResultMsg(schemas.Result{Meta: meta, Batch: batchNo, Status: schemas.StatusFailed, Rows: rows,
		Message: "batch dead-lettered (see 'regressd dlq list'): " + dl.Reason})
	if err != nil {
		return err
	}
	w.cfg.Tracing.InjectMsg(w.cfg.Tracing.ExtractMsg(ctx, dl.Header), m)
	// Its own id, so that the batch's real result, should the batch be
	// retried from the DLQ, is not dropped as a duplicate of this one.
	_, err = w.js.PublishMsg(ctx, m, jetstream.WithMsgID(schemas.BatchMsgID(meta.TaskID, batchNo)+":dead-letter"))
	return err
}
