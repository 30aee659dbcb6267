package producer

// Packing the small series of a group_by run: a series whose queries fit
// in one batch and whose context is small travels with others in one
// pack message (schemas.PackSeries), its context inline rather than in
// the object store, and so does a series that ends here (its verdict).
// A pack's series share one record of context rows and one of query rows.
// A large series keeps its own context object and batches. Each series is
// still a task of its own: the writer claims its batch 0 (or settles its
// verdict) as it would a lone series', so a pack published again, whole or
// split otherwise, writes nothing twice.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/regressd/regressd/schemas"
)

// Pack bounds: a pack closes at packMaxSeries series or packMaxBytes of
// rows, well under NATS' max_payload (8 MB); a series whose context would
// take more than packMaxContext bytes keeps its own context object. Large
// packs pay off: a pack's cost in the writer (its transaction, its claims,
// its count into the run) is per pack, not per series.
const (
	packMaxSeries  = 512
	packMaxBytes   = 2 << 20
	packMaxContext = 128 << 10
)

// packSeries is how many series a pack of a run of n series takes: an
// eighth of them, so that a run of a thousand series still makes packs
// enough for the roles to work on at once, between 64 and packMaxSeries.
func packSeries(n int) int { return min(max(n/8, 64), packMaxSeries) }

// packable reports whether a planned series travels in a pack: it ends
// here, or its queries fit in one batch and its context is small.
func packable(s *seriesPlan, batchSize, features int) bool {
	if s.verdict != nil {
		return true
	}
	return len(s.qs) <= batchSize && len(s.ex)*(features+1)*8 <= packMaxContext
}

// packer gathers series into packs and publishes each as it fills, a few
// encoded at once beside the planning of the next (its owner calls wait);
// wait waits for every pack's acknowledgement.
type packer struct {
	p       *Producer
	trigger string
	parent  string
	w       window
	max     int // series a pack takes (packSeries)
	cur     []schemas.PackSeries
	ex, qs  []int // the current pack's context and query rows, series after series
	bytes   int
	packs   int

	g    errgroup.Group // the packs being encoded and published
	mu   sync.Mutex
	acks []jetstream.PubAckFuture
}

// packsInFlight bounds the packs a producer encodes at once.
const packsInFlight = 2

// add puts a series into the current pack, publishing the pack first when
// the series would not fit.
func (k *packer) add(ctx context.Context, s *seriesPlan) error {
	e := schemas.PackSeries{Meta: s.meta}
	size := 512 // its meta
	if s.verdict != nil {
		e.Meta.Batches = 0
		e.Status, e.Message, e.Code = s.verdict.status, s.verdict.msg, s.verdict.code
	} else {
		e.Meta.ContextDigest, e.Meta.Batches = k.w.digest(s.ex), 1
		size += (len(s.ex)*(len(k.w.features)+1) + len(s.qs)*(len(k.w.features)+1)) * 8
	}
	if len(k.cur) > 0 && (len(k.cur) >= k.max || k.bytes+size > packMaxBytes) {
		if err := k.flush(ctx); err != nil {
			return err
		}
	}
	k.cur, k.bytes = append(k.cur, e), k.bytes+size
	if s.verdict == nil {
		k.ex, k.qs = append(k.ex, s.ex...), append(k.qs, s.qs...)
	}
	return nil
}

// flush starts publishing the current pack, if any; an error is wait's.
func (k *packer) flush(ctx context.Context) error {
	if len(k.cur) == 0 {
		return nil
	}
	if k.packs == 0 {
		k.g.SetLimit(packsInFlight)
	}
	series, ex, qs := k.cur, k.ex, k.qs
	k.cur, k.ex, k.qs, k.bytes = nil, nil, nil, 0
	k.packs++
	k.g.Go(func() error { return k.publish(ctx, series, ex, qs) })
	return nil
}

// publish encodes and publishes one pack: its series and their context
// and query rows.
func (k *packer) publish(ctx context.Context, series []schemas.PackSeries, ex, qs []int) error {
	features := series[0].Meta.Features
	rec := k.w.contextRecord(features, ex)
	ctxBody, err := schemas.EncodeRecord(rec)
	rec.Release()
	if err != nil {
		return err
	}
	rec = k.w.queryRecord(features, qs)
	queries, err := schemas.EncodeRecord(rec)
	rec.Release()
	if err != nil {
		return err
	}
	ids := make([]string, len(series))
	for i, e := range series {
		ids[i] = e.Meta.TaskID
	}
	m, err := schemas.NewPackMsg(k.trigger, k.parent, schemas.Pack{Series: series, Context: ctxBody, Queries: queries})
	if err != nil {
		return err
	}
	k.p.cfg.Tracing.InjectMsg(ctx, m)
	ack, err := k.p.js.PublishMsgAsync(m, jetstream.WithMsgID(schemas.PackMsgID(k.parent, ids)))
	if err != nil {
		return fmt.Errorf("publish pack: %w", err)
	}
	k.mu.Lock()
	k.acks = append(k.acks, ack)
	k.mu.Unlock()
	return nil
}

// digest is the digest of a series' context rows (TaskMeta's
// ContextDigest, which keys the engine's cache), from their values.
func (w window) digest(rows []int) string {
	h := sha256.New()
	buf := make([]byte, 0, 8*(len(w.features)+1)*len(rows))
	for _, i := range rows {
		for _, f := range w.features {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(f.Value(i)))
		}
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(w.target.Value(i)))
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// wait publishes the last pack and waits for every pack's acknowledgement.
func (k *packer) wait(ctx context.Context) error {
	k.flush(ctx)
	if err := k.g.Wait(); err != nil {
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
