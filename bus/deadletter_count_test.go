package bus_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

type counted struct {
	mu  sync.Mutex
	got []string
}

func (c *counted) CountDeadLetter(stream, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, stream+"/"+reason)
}

func (c *counted) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.got)
	slices.Sort(out)
	return out
}

// Every dead letter is counted once, by its stream and its reason's class:
// a permanent error, another schema version, a panic, a last delivery
// that failed.
func TestDeadLettersCountedByReason(t *testing.T) {
	s := bustest.New(t)
	c := &counted{}
	run(t, s, bus.ConsumerConfig{MaxDeliver: 2, DeadLetters: c}, func(ctx context.Context, msg jetstream.Msg) error {
		switch string(msg.Data()) {
		case "panic":
			panic("boom")
		case "flaky":
			return bus.RetryIn(errors.New("still down"), 10*time.Millisecond)
		}
		return bus.Permanent(errors.New("undecodable"))
	})
	publish(t, s, "bad", true)
	publish(t, s, "old", false)
	publish(t, s, "panic", true)
	publish(t, s, "flaky", true)
	dlq(t, s, 4, 15*time.Second)
	b := schemas.StreamBatches + "/"
	want := []string{b + "gave_up", b + "panic", b + "permanent", b + "schema_version"}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(c.list(), want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := c.list(); !slices.Equal(got, want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
}

// A message whose handler hung on every delivery reaches the DLQ through
// the server's MAX_DELIVERIES advisory, counted as max_deliveries.
func TestDeadLetterOfHungHandlerCountedAsMaxDeliveries(t *testing.T) {
	s := bustest.New(t)
	c := &counted{}
	block := make(chan struct{})
	defer close(block)
	run(t, s, bus.ConsumerConfig{AckWait: time.Second, MaxWork: 1500 * time.Millisecond, MaxDeliver: 2,
		Concurrency: 3, Grace: 100 * time.Millisecond, DeadLetters: c},
		func(ctx context.Context, msg jetstream.Msg) error {
			select {
			case <-block:
			case <-ctx.Done():
			}
			return ctx.Err()
		})
	publish(t, s, "hangs", true)
	dlq(t, s, 1, 30*time.Second)
	want := []string{schemas.StreamBatches + "/max_deliveries"}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(c.list(), want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := c.list(); !slices.Equal(got, want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
}
