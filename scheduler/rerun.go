package scheduler

// A request's runs of one window: every request is a run of its own, as
// the plugin's are, except while the window's last run is under way.

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nuid"

	"github.com/regressd/regressd/schemas"
)

// PublishRequest publishes an engine request's job: a new run of its
// window, or the run of that window still under way (joined is true), so
// that a request retried while its run goes on (a client that timed out,
// two calls at once) costs one run. Once a window's run has ended, asking
// again is a new run, which reports what it did (with skip_existing:
// nothing written, the rows already there counted).
//
// The runs of a window are numbered: run k's message id is derived from
// the window and k, so every scheduler process finds the last one in the
// ledger (a few lookups, doubling then halving) and two calls at once
// publish the same next run, which JetStream keeps once.
func (p *Publisher) PublishRequest(ctx context.Context, job schemas.Job) (taskID string, joined bool, err error) {
	if p.lookup == nil {
		// Without the ledger a run's end is not known for good: every
		// request is a run of its own.
		id, _, err := p.Publish(ctx, job, "request:"+nuid.Next())
		return id, false, err
	}
	msgID := func(k int) string {
		return job.MsgID("request:" + strconv.Itoa(k))
	}
	exists := func(k int) (schemas.TaskSummary, bool, error) {
		return p.recorded(ctx, schemas.TaskID(msgID(k)))
	}
	// The runs that exist are 0 … last: find last, or -1 for none.
	lo, hi := -1, 0 // run lo exists (or lo is -1); run hi is not known to
	for {
		_, ok, err := exists(hi)
		if err != nil {
			return "", false, err
		}
		if !ok {
			break
		}
		lo, hi = hi, 2*hi+1
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		_, ok, err := exists(mid)
		if err != nil {
			return "", false, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo >= 0 {
		sum, _, err := exists(lo)
		if err != nil {
			return "", false, err
		}
		if !sum.Done() && time.Since(sum.Updated) < staleRun {
			return sum.TaskID, true, nil
		}
	}
	id, dup, err := p.publishAs(ctx, job, msgID(lo+1))
	return id, dup, err
}
