package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/regressd/regressd/schemas"
)

// defaultInstance names a worker in the status bucket: host and pid, unique
// among the processes of one machine and readable on the status page.
func defaultInstance() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// reportStatus publishes the breaker's state to schemas.BucketStatus until
// ctx ends: at once, on every change, and every schemas.StatusInterval so
// the entry outlives the bucket's TTL while the worker lives. On the way
// out it deletes its entry. A failed put is logged and retried at the next
// tick: the status page is a view, never a reason to stop predicting.
func (w *Worker) reportStatus(ctx context.Context) {
	kv, err := w.js.KeyValue(ctx, schemas.BucketStatus)
	if err != nil {
		w.log.Warn("status bucket unavailable; the status page will not show this worker's breaker", "err", err)
		return
	}
	key := schemas.WorkerStatusKey(w.cfg.Instance)
	put := func() {
		b, _ := json.Marshal(schemas.WorkerStatus{Worker: w.cfg.Instance, Breaker: w.cb.State().String(),
			Predictor: w.cfg.PredictorName, Updated: time.Now().UTC()})
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := kv.Put(pctx, key, b); err != nil && ctx.Err() == nil {
			w.log.Warn("publish worker status", "err", err)
		}
	}
	tick := time.NewTicker(schemas.StatusInterval)
	defer tick.Stop()
	for {
		put()
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			kv.Delete(dctx, key)
			cancel()
			return
		case <-tick.C:
		case <-w.breakerChanged:
		}
	}
}
