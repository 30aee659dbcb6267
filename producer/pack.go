package producer

// Packing the small series of a group_by run: a series whose queries fit
// in one batch and whose context is small travels with others in one
// pack message (schemas.PackSeries), its context inline rather than in
// the object store, and so does a series that ends here (its verdict).
// A large series keeps its own context object and batches. Each series is
// still a task of its own: the writer claims its batch 0 (or settles its
// verdict) as it would a lone series', so a pack published again, whole or
// split otherwise, writes nothing twice.

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// Pack bounds: a pack closes at packMaxSeries series or packMaxBytes of
// records, well under NATS' max_payload; a series whose context would take
// more than packMaxContext bytes keeps its own context object.
const (
	packMaxSeries  = 128
	packMaxBytes   = 1 << 20
	packMaxContext = 128 << 10
)

// packable reports whether a planned series travels in a pack: it ends
// here, or its queries fit in one batch and its context is small.
func packable(s *seriesPlan, batchSize, features int) bool {
	if s.verdict != nil {
		return true
	}
	return len(s.qs) <= batchSize && len(s.ex)*(features+1)*8 <= packMaxContext
}

// packer gathers series into packs and publishes each as it fills; wait
// waits for every pack's acknowledgement.
type packer struct {
	p       *Producer
	trigger string
	parent  string
	w       window
	cur     []schemas.PackSeries
	bytes   int
	acks    []jetstream.PubAckFuture
	packs   int
}

// add puts a series into the current pack, publishing the pack first when
// the series would not fit.
func (k *packer) add(ctx context.Context, s *seriesPlan) error {
	e := schemas.PackSeries{Meta: s.meta}
	if s.verdict != nil {
		e.Meta.Batches = 0
		e.Status, e.Message, e.Code = s.verdict.status, s.verdict.msg, s.verdict.code
	} else {
		rec := k.w.contextRecord(e.Meta.Features, s.ex)
		body, err := schemas.EncodeRecord(rec)
		rec.Release()
		if err != nil {
			return err
		}
		q := k.w.queryRecord(e.Meta.Features, s.qs)
		queries, err := schemas.EncodeRecord(q)
		q.Release()
		if err != nil {
			return err
		}
		e.Meta.ContextDigest, e.Meta.Batches = schemas.ContextDigest(body), 1
		e.Context, e.Queries = body, queries
	}
	size := len(e.Context) + len(e.Queries) + 1024 // and its meta
	if len(k.cur) > 0 && (len(k.cur) >= packMaxSeries || k.bytes+size > packMaxBytes) {
		if err := k.flush(ctx); err != nil {
			return err
		}
	}
	k.cur, k.bytes = append(k.cur, e), k.bytes+size
	return nil
}

// flush publishes the current pack, if any.
func (k *packer) flush(ctx context.Context) error {
	if len(k.cur) == 0 {
		return nil
	}
	ids := make([]string, len(k.cur))
	for i, e := range k.cur {
		ids[i] = e.Meta.TaskID
	}
	m, err := schemas.NewPackMsg(k.trigger, k.parent, k.cur)
	if err != nil {
		return err
	}
	k.p.cfg.Tracing.InjectMsg(ctx, m)
	ack, err := k.p.js.PublishMsgAsync(m, jetstream.WithMsgID(schemas.PackMsgID(k.parent, ids)))
	if err != nil {
		return fmt.Errorf("publish pack: %w", err)
	}
	k.acks, k.cur, k.bytes = append(k.acks, ack), nil, 0
	k.packs++
	return nil
}

// wait publishes the last pack and waits for every pack's acknowledgement.
func (k *packer) wait(ctx context.Context) error {
	if err := k.flush(ctx); err != nil {
		return err
	}
	timeout := time.NewTimer(publishTimeout)
	defer timeout.Stop()
	for i, ack := range k.acks {
		select {
		case <-ack.Ok():
		case err := <-ack.Err():
			return fmt.Errorf("publish pack %d: %w", i, err)
		case <-timeout.C:
			return fmt.Errorf("publish pack %d: no acknowledgement in %s", i, publishTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
