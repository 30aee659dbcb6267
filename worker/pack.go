package worker

// Packs: many small series of a group_by run in one message
// (schemas.PackSeries). Each series is predicted from its own context,
// through the same Predictor and breaker as a lone batch, a few at a time;
// a series that ended in the producer passes through as its verdict. One
// result pack answers the pack, one Result per series.

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
)

// packInFlight bounds the series of one pack predicted at once.
const packInFlight = 4

func (w *Worker) handlePack(ctx context.Context, msg jetstream.Msg) error {
	series, err := schemas.DecodePack(msg.Headers(), msg.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	parent := schemas.PackParent(msg.Headers())
	log := w.log.With("task_id", parent, "pack_series", len(series))
	out := make([]schemas.Result, len(series))
	errs := make([]error, len(series))
	var g errgroup.Group
	g.SetLimit(packInFlight)
	for i, s := range series {
		if s.Status != "" {
			out[i] = schemas.Result{Meta: s.Meta, Batch: schemas.VerdictBatch, Status: s.Status, Message: s.Message, Code: s.Code}
			continue
		}
		g.Go(func() error {
			out[i], errs[i] = w.predictPacked(ctx, s)
			return nil
		})
	}
	g.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// A transient failure of any series tries the whole pack again while
	// its attempts last: each series is still called once per attempt, so
	// max_retries bounds its calls as it bounds a lone batch's.
	attempt := uint64(1)
	if md, _ := msg.Metadata(); md != nil {
		attempt = md.NumDelivered
	}
	for i, err := range errs {
		if err == nil || IsFinal(err) {
			continue
		}
		attempts := w.attempts(series[i].Meta)
		if attempt < uint64(attempts) {
			if w.cfg.NeedKey {
				w.cfg.Metrics.GatewayRetry(gatewayOutcome(ctx, err))
			}
			return bus.RetryIn(err, retryWait(attempt, err))
		}
		errs[i] = Final(fmt.Errorf("gave up after %d attempts (max_retries=%d): %w", attempt, attempts, err))
	}
	predictedRows := 0
	for i, err := range errs {
		switch {
		case err != nil:
			log.Error("series failed", "series_task", out[i].Meta.TaskID, "err", err)
			out[i].Status, out[i].Message, out[i].Code, out[i].Body = schemas.StatusFailed, err.Error(), callerStatus(err), nil
		case out[i].Batch == 0:
			predictedRows += out[i].Rows
		}
	}
	if err := w.publishPack(ctx, parent, out, ""); err != nil {
		return err
	}
	w.cfg.Metrics.AddRows(metrics.RowsPredicted, predictedRows)
	log.Debug("pack predicted")
	return msg.Ack()
}

// predictPacked predicts one series of a pack: its result (Rows set even
// when it fails), or the error it failed with.
func (w *Worker) predictPacked(ctx context.Context, s schemas.PackSeries) (schemas.Result, error) {
	meta := s.Meta
	r := schemas.Result{Meta: meta, Batch: 0, Status: schemas.StatusOK}
	rec, err := schemas.DecodeRecord(s.Queries, schemas.QuerySchema(meta.Features))
	if err != nil {
		return r, Final(fmt.Errorf("queries: %w", err))
	}
	defer rec.Release()
	r.Rows = int(rec.NumRows())
	x, y, err := decodeContext(s.Context, schemas.ContextSchema(meta.Features), len(meta.Features))
	if err != nil {
		return r, Final(fmt.Errorf("context is malformed: %w", err))
	}
	preds, err := w.predictWith(ctx, meta, x, y, rec)
	if err != nil {
		return r, err
	}
	res := resultRecord(rec.Column(0).(*array.Timestamp), preds, meta.Quantiles)
	body, err := schemas.EncodeRecord(res)
	res.Release()
	if err != nil {
		return r, Final(err)
	}
	r.Body, r.Outside = body, preds.Outside
	return r, nil
}

// publishPack sends a pack's results to the writer; idSuffix, when not
// empty, follows the pack's message id.
func (w *Worker) publishPack(ctx context.Context, parent string, rs []schemas.Result, idSuffix string) error {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.Meta.TaskID
	}
	m, err := schemas.NewResultPackMsg(rs[0].Meta.Trigger, parent, rs)
	if err != nil {
		return err
	}
	w.cfg.Tracing.InjectMsg(ctx, m)
	_, err = w.js.PublishMsg(ctx, m, jetstream.WithMsgID(schemas.PackMsgID(parent, ids)+idSuffix))
	return err
}

// packDeadLetter settles a dead-lettered pack: every series to predict
// fails, and every verdict stands.
func (w *Worker) packDeadLetter(ctx context.Context, dl bus.DeadLetter) error {
	series, err := schemas.DecodePack(dl.Header, dl.Data)
	if err != nil {
		return nil // belongs to no run we can read
	}
	rs := make([]schemas.Result, len(series))
	for i, s := range series {
		rs[i] = schemas.Result{Meta: s.Meta, Batch: schemas.VerdictBatch, Status: s.Status, Message: s.Message, Code: s.Code}
		if s.Status == "" {
			rows := 0
			if rec, err := schemas.DecodeRecord(s.Queries, nil); err == nil {
				rows = int(rec.NumRows())
				rec.Release()
			}
			rs[i] = schemas.Result{Meta: s.Meta, Batch: 0, Status: schemas.StatusFailed, Rows: rows,
				Message: "batch dead-lettered (see 'regressd dlq list'): " + dl.Reason}
		}
	}
	// Its own id, as a lone batch's (see onDeadLetter).
	return w.publishPack(w.cfg.Tracing.ExtractMsg(ctx, dl.Header), schemas.PackParent(dl.Header), rs, ":dead-letter")
}
