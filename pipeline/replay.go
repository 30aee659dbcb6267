package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/regressd/regressd/scheduler"
)

// Backfill is a replay on a bus: a trigger's past jobs, or the windows of
// a range, listed first (OpenBackfill) and then re-run through the roles
// as new tasks of one run (Run). Close it when done.
type Backfill struct {
	stores Stores
	st     *Stack
	req    scheduler.ReplayRequest
	log    *slog.Logger
	// Windows are what Run will run; From says where they came from
	// ("published since …", "in [start, end)").
	Windows []*scheduler.ReplayWindow
	From    string
}

// OpenBackfill connects to the bus of s and lists req's windows as of now.
func OpenBackfill(ctx context.Context, s Stores, req scheduler.ReplayRequest, now time.Time, log *slog.Logger) (*Backfill, error) {
	if err := req.Check(now); err != nil {
		return nil, err
	}
	st, err := Open(ctx, s, "regressd-replay", true, false, log)
	if err != nil {
		return nil, err
	}
	b := &Backfill{stores: s, st: st, req: req, log: log}
	if b.Windows, b.From, err = req.Windows(ctx, st.JS, now); err != nil {
		st.Close()
		return nil, err
	}
	return b, nil
}

// Run publishes the windows, at most the request's Parallel at once, and
// (unless noWait) waits for their tasks, telling done of each. key is the
// model-service key the jobs carry, sealed per task with the deployment
// secret; empty, they carry none (the built-in engine needs none; a hosted
// gateway will refuse them).
func (b *Backfill) Run(ctx context.Context, key string, secret []byte, noWait bool, done func(*scheduler.ReplayWindow)) error {
	seal := func(string) (string, error) { return "", nil }
	if key == "" {
		b.log.Warn("SERVICE_API_KEY is not set: replayed jobs carry no model-service key (fine for the built-in engine; a hosted gateway will refuse them)")
	} else {
		sealer, err := b.stores.Sealer(secret, false)
		if err != nil {
			return fmt.Errorf("seal SERVICE_API_KEY: %w", err)
		}
		seal = func(taskID string) (string, error) { return sealer.Seal(key, taskID, time.Hour) }
	}
	pub, err := scheduler.NewPublisher(ctx, b.st.JS, nil, nil)
	if err != nil {
		return err
	}
	rid := make([]byte, 4)
	rand.Read(rid)
	runID := "replay-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(rid)
	scheduler.Replay{Trigger: b.req.Trigger, RunID: runID, Parallel: b.req.Parallel, NoWait: noWait, Seal: seal, Done: done}.Run(ctx, pub, b.Windows)
	return nil
}

// Close disconnects from the bus.
func (b *Backfill) Close() { b.st.Close() }
