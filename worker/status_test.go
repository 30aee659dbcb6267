package worker

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// TestBreakerStatusPublished: a running worker keeps its breaker's state in
// the status bucket, reports a change at once (well before the periodic
// put), and removes its entry when it stops.
func TestBreakerStatusPublished(t *testing.T) {
	srv := bustest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sealer, err := schemas.NewSealer([]byte("test-secret-test-secret-test-sec"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(ctx, srv.JS, Config{Predictor: NewBenchPredictor(), PredictorName: "local", Sealer: sealer,
		Instance: "host.a/1", BreakerFailures: 2, BreakerCooldown: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	kv, err := srv.JS.KeyValue(ctx, schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	key := schemas.WorkerStatusKey("host.a/1")
	read := func() (schemas.WorkerStatus, error) {
		e, err := kv.Get(ctx, key)
		if err != nil {
			return schemas.WorkerStatus{}, err
		}
		var ws schemas.WorkerStatus
		return ws, json.Unmarshal(e.Value(), &ws)
	}
	waitFor := func(what string, ok func(schemas.WorkerStatus, error) bool) {
		t.Helper()
		deadline := time.Now().Add(schemas.StatusInterval / 2)
		for {
			ws, err := read()
			if ok(ws, err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last read %+v, %v", what, ws, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("closed breaker published", func(ws schemas.WorkerStatus, err error) bool {
		return err == nil && ws.Breaker == schemas.BreakerClosed && ws.Worker == "host.a/1" && ws.Predictor == "local"
	})
	// Two transient failures open the breaker.
	for range 2 {
		w.cb.Execute(func() (*Detailed, error) { return nil, errors.New("connection refused") })
	}
	waitFor("open breaker published", func(ws schemas.WorkerStatus, err error) bool {
		return err == nil && ws.Breaker == schemas.BreakerOpen
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if _, err := kv.Get(context.Background(), key); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a stopped worker's entry is still there: %v", err)
	}
}
