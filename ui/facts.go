package ui

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// The facts the page reads from the bus: the dead-letter count and each
// worker's breaker. Each is read on its own, so one that cannot be read
// says why and the rest of the page still shows.

// factTimeout bounds each read from the bus.
const factTimeout = 5 * time.Second

// deadLetters is the dead-letter queue's size; Count is null when it could
// not be read, and Message says why.
type deadLetters struct {
	Count   *uint64 `json:"count"`
	Message string  `json:"message,omitempty"`
}

func (u *UI) deadLetters(ctx context.Context) deadLetters {
	ctx, cancel := context.WithTimeout(ctx, factTimeout)
	defer cancel()
	str, err := u.cfg.JS.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return deadLetters{Message: "cannot read " + schemas.StreamDLQ + ": " + err.Error()}
	}
	info, err := str.Info(ctx)
	if err != nil {
		return deadLetters{Message: "cannot read " + schemas.StreamDLQ + ": " + err.Error()}
	}
	n := info.State.Msgs
	return deadLetters{Count: &n}
}

// Overall breaker states beyond the workers' own.
const breakerUnknown = "unknown"

// breakerStatus is the circuit breaker as the workers report it: State is
// open when any worker's is open, half-open when any is half-open, closed
// when every reporting worker's is closed, and unknown when none reports.
type breakerStatus struct {
	State   string                 `json:"state"`
	Workers []schemas.WorkerStatus `json:"workers"`
	Message string                 `json:"message,omitempty"`
}

func (u *UI) breaker(ctx context.Context) breakerStatus {
	ctx, cancel := context.WithTimeout(ctx, factTimeout)
	defer cancel()
	out := breakerStatus{State: breakerUnknown, Workers: []schemas.WorkerStatus{}}
	kv, err := u.cfg.JS.KeyValue(ctx, schemas.BucketStatus)
	if err != nil {
		out.Message = "cannot read " + schemas.BucketStatus + ": " + err.Error()
		return out
	}
	keys, err := kv.ListKeysFiltered(ctx, schemas.WorkerStatusPrefix+">")
	if err != nil {
		out.Message = "cannot read " + schemas.BucketStatus + ": " + err.Error()
		return out
	}
	defer keys.Stop()
	seen := map[string]bool{}
	for k := range keys.Keys() {
		if seen[k] {
			continue // listing may repeat a key that changed meanwhile
		}
		seen[k] = true
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // gone since it was listed
		}
		if err != nil {
			out.Message = "cannot read " + schemas.BucketStatus + ": " + err.Error()
			return out
		}
		var ws schemas.WorkerStatus
		if json.Unmarshal(e.Value(), &ws) == nil && ws.Breaker != "" {
			out.Workers = append(out.Workers, ws)
		}
	}
	sort.Slice(out.Workers, func(i, j int) bool { return out.Workers[i].Worker < out.Workers[j].Worker })
	if len(out.Workers) == 0 {
		out.Message = "no worker has reported in the last " + schemas.StatusTTL.String() + ": is one running?"
		return out
	}
	out.State = schemas.BreakerClosed
	for _, ws := range out.Workers {
		switch {
		case ws.Breaker == schemas.BreakerOpen:
			out.State = schemas.BreakerOpen
		case ws.Breaker == schemas.BreakerHalfOpen && out.State != schemas.BreakerOpen:
			out.State = schemas.BreakerHalfOpen
		}
	}
	var open []string
	for _, ws := range out.Workers {
		if ws.Breaker != schemas.BreakerClosed {
			open = append(open, ws.Worker+" "+ws.Breaker)
		}
	}
	if len(open) > 0 {
		out.Message = "a worker whose breaker is open pulls no batches until it closes: " + strings.Join(open, ", ")
	}
	return out
}
