package worker

// Packs: many small series of a group_by run in one message
// (schemas.Pack). Its two records are decoded once; each series is
// predicted from its own rows of them (its context alone), through the
// same Predictor and breaker as a lone batch, a few at a time: the engine
// has no call for many independent contexts at once. A series that ended
// in the producer passes through as its verdict. One result pack answers
// the pack: one Result per series and one record of every prediction.

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/schemas"
)

// packInFlight bounds the series of one pack predicted at once.
const packInFlight = 4

// packRows are a pack's decoded records and where each series' rows lie.
type packRows struct {
	x       [][]float64
	y       []float64
	queries arrow.RecordBatch // nil when every series is a verdict
	ctxAt   []int             // series i's context rows start there
	queryAt []int             // and its query rows
}

func (p *packRows) release() {
	if p.queries != nil {
		p.queries.Release()
	}
}

// decodePackRows decodes a pack's records and checks that they hold its
// series' rows.
func decodePackRows(pack schemas.Pack) (*packRows, error) {
	features := pack.Series[0].Meta.Features
	r := &packRows{ctxAt: make([]int, len(pack.Series)), queryAt: make([]int, len(pack.Series))}
	nc, nq := 0, 0
	for i, s := range pack.Series {
		c, q := s.PackRows()
		r.ctxAt[i], r.queryAt[i] = nc, nq
		nc, nq = nc+c, nq+q
	}
	if nq == 0 {
		return r, nil
	}
	var err error
	if r.x, r.y, err = decodeContext(pack.Context, schemas.ContextSchema(features), len(features)); err != nil {
		return nil, fmt.Errorf("pack context: %w", err)
	}
	if r.queries, err = schemas.DecodeRecord(pack.Queries, schemas.QuerySchema(features)); err != nil {
		return nil, fmt.Errorf("pack queries: %w", err)
	}
	if len(r.y) != nc || int(r.queries.NumRows()) != nq {
		r.release()
		return nil, fmt.Errorf("pack of %d context and %d query rows holds %d and %d", nc, nq, len(r.y), r.queries.NumRows())
	}
	return r, nil
}

func (w *Worker) handlePack(ctx context.Context, msg jetstream.Msg) error {
	pack, err := schemas.DecodePack(msg.Headers(), msg.Data())
	if err != nil {
		return bus.Permanent(err)
	}
	rows, err := decodePackRows(pack)
	if err != nil {
		return bus.Permanent(err)
	}
	defer rows.release()
	parent := schemas.PackParent(msg.Headers())
	log := w.log.With("task_id", parent, "pack_series", len(pack.Series))
	preds := make([]*Detailed, len(pack.Series))
	errs := make([]error, len(pack.Series))
	predict := func(idx []int) {
		var g errgroup.Group
		g.SetLimit(packInFlight)
		for _, i := range idx {
			s := pack.Series[i]
			nc, nq := s.PackRows()
			g.Go(func() error {
				q := rows.queries.NewSlice(int64(rows.queryAt[i]), int64(rows.queryAt[i]+nq))
				defer q.Release()
				c := rows.ctxAt[i]
				preds[i], errs[i] = w.predictWith(ctx, s.Meta, rows.x[c:c+nc:c+nc], rows.y[c:c+nc:c+nc], q)
				return nil
			})
		}
		g.Wait()
	}
	var all []int
	for i, s := range pack.Series {
		if _, nq := s.PackRows(); nq > 0 {
			all = append(all, i)
		}
	}
	predict(all)
	if err := w.retrySeries(ctx, delivery(msg), pack, errs, predict); err != nil {
		return err
	}
	rs := make([]schemas.Result, len(pack.Series))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ResultSchemaFor(pack.Series[0].Meta.Quantiles))
	defer b.Release()
	predicted := 0
	for i, s := range pack.Series {
		_, nq := s.PackRows()
		switch {
		case s.Status != "":
			rs[i] = schemas.Result{Meta: s.Meta, Batch: schemas.VerdictBatch, Status: s.Status, Message: s.Message, Code: s.Code}
		case errs[i] != nil:
			log.Error("series failed", "series_task", s.Meta.TaskID, "err", errs[i])
			rs[i] = schemas.Result{Meta: s.Meta, Status: schemas.StatusFailed, Rows: nq, Message: errs[i].Error(), Code: callerStatus(errs[i])}
		default:
			rs[i] = schemas.Result{Meta: s.Meta, Status: schemas.StatusOK, Rows: nq, Outside: preds[i].Outside}
			appendResult(b, rows.queries.Column(0).(*array.Timestamp), rows.queryAt[i], preds[i], s.Meta.Quantiles)
			predicted += nq
		}
	}
	rec := b.NewRecordBatch()
	body, err := schemas.EncodeRecord(rec)
	rec.Release()
	if err != nil {
		return err
	}
	if err := w.publishPack(ctx, parent, rs, body, ""); err != nil {
		return err
	}
	w.cfg.Metrics.AddRows(metrics.RowsPredicted, predicted)
	log.Debug("pack predicted")
	return msg.Ack()
}

// retrySeries tries the series of a pack that failed transiently again,
// in this delivery, after the backoff a lone batch would get, until each
// succeeds, fails for good or spends its attempts (max_retries, counted
// from the delivery's number): the predictions of the others are kept.
// Retrying the whole pack instead called every series again, spending a
// gateway key's rate on predictions already made, and failed series whose
// prediction had come back on an earlier attempt. bus.Consume keeps the
// message alive while this waits.
func (w *Worker) retrySeries(ctx context.Context, attempt uint64, pack schemas.Pack, errs []error, predict func([]int)) error {
	for ; ; attempt++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var again []int
		var wait time.Duration
		for i, err := range errs {
			if err == nil || IsFinal(err) {
				continue
			}
			d, final := w.nextAttempt(ctx, attempt, pack.Series[i].Meta, err)
			if final != nil {
				errs[i] = final
				continue
			}
			again, wait = append(again, i), max(wait, d)
		}
		if len(again) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		predict(again)
	}
}

// publishPack sends a pack's results and the record of their predictions
// to the writer; idSuffix, when not empty, follows the pack's message id.
func (w *Worker) publishPack(ctx context.Context, parent string, rs []schemas.Result, body []byte, idSuffix string) error {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.Meta.TaskID
	}
	m, err := schemas.NewResultPackMsg(rs[0].Meta.Trigger, parent, rs, body)
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
	pack, err := schemas.DecodePack(dl.Header, dl.Data)
	if err != nil {
		return nil // belongs to no run we can read
	}
	rs := make([]schemas.Result, len(pack.Series))
	for i, s := range pack.Series {
		rs[i] = schemas.Result{Meta: s.Meta, Batch: schemas.VerdictBatch, Status: s.Status, Message: s.Message, Code: s.Code}
		if _, nq := s.PackRows(); nq > 0 {
			rs[i] = schemas.Result{Meta: s.Meta, Status: schemas.StatusFailed, Rows: nq,
				Message: "batch dead-lettered (see 'regressd dlq list'): " + dl.Reason}
		}
	}
	// Its own id, as a lone batch's (see onDeadLetter).
	return w.publishPack(w.cfg.Tracing.ExtractMsg(ctx, dl.Header), schemas.PackParent(dl.Header), rs, nil, ":dead-letter")
}
