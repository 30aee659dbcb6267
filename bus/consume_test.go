package bus_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

const subject = schemas.SubjectBatches + "t"

func publish(t *testing.T, s *bustest.Server, body string, withSchema bool) uint64 {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
	if withSchema {
		m.Header.Set(schemas.HeaderSchema, schemas.Version)
	}
	m.Header.Set(schemas.HeaderTask, `{"task_id":"t_test"}`)
	ack, err := s.JS.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// run consumes with h until the returned stop is called; stop returns how
// long Consume took to return.
func run(t *testing.T, s *bustest.Server, cfg bus.ConsumerConfig, h bus.Handler) (stop func() time.Duration) {
	t.Helper()
	if cfg.Stream == "" {
		cfg.Stream, cfg.Durable, cfg.Filter = schemas.StreamBatches, "test", subject
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := bus.Consume(ctx, s.JS, cfg, h); err != nil {
			t.Error(err)
		}
	}()
	var once sync.Once
	var took time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			<-done
			took = time.Since(start)
		})
		return took
	}
	t.Cleanup(func() { stop() })
	return stop
}

// dlq waits for n dead letters and returns them.
func dlq(t *testing.T, s *bustest.Server, n int, within time.Duration) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	str, err := s.JS.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		info, err := str.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if int(info.State.Msgs) >= n {
			var out []*jetstream.RawStreamMsg
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				if m, err := str.GetMsg(ctx, seq); err == nil {
					out = append(out, m)
				}
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters after %v, want %d", info.State.Msgs, within, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPermanentAndUnversionedGoToDLQWithReason(t *testing.T) {
	s := bustest.New(t)
	var settled atomic.Int32
	run(t, s, bus.ConsumerConfig{OnDeadLetter: func(ctx context.Context, dl bus.DeadLetter) error {
		settled.Add(1)
		return nil
	}}, func(ctx context.Context, msg jetstream.Msg) error {
		if string(msg.Data()) == "good" {
			return msg.DoubleAck(ctx)
		}
		return bus.Permanent(errors.New("undecodable batch"))
	})
	bad := publish(t, s, "bad", true)
	publish(t, s, "old", false)
	publish(t, s, "good", true)
	got := dlq(t, s, 2, 10*time.Second)
	reasons := got[0].Header.Get(schemas.HeaderReason) + " | " + got[1].Header.Get(schemas.HeaderReason)
	for _, want := range []string{"undecodable batch", `schema version ""`} {
		if !strings.Contains(reasons, want) {
			t.Errorf("reasons %q lack %q", reasons, want)
		}
	}
	if o := got[0].Header.Get(schemas.HeaderOrigin); o != schemas.StreamBatches+":"+itoa(bad)+":"+subject {
		t.Errorf("origin %q", o)
	}
	if got[0].Subject != "regress.dlq.regress_batches.t" {
		t.Errorf("dlq subject %q", got[0].Subject)
	}
	waitFor(t, 5*time.Second, func() bool { return settled.Load() == 2 }, "OnDeadLetter ran for both")
	waitFor(t, 5*time.Second, func() bool { return streamMsgs(t, s, schemas.StreamBatches) == 0 }, "the work queue emptied")
}

func TestTransientErrorsAreRetriedThenDeadLettered(t *testing.T) {
	s := bustest.New(t)
	var calls atomic.Int32
	run(t, s, bus.ConsumerConfig{MaxDeliver: 3}, func(ctx context.Context, msg jetstream.Msg) error {
		calls.Add(1)
		if string(msg.Data()) == "flaky" && calls.Load() >= 2 {
			return msg.DoubleAck(ctx)
		}
		return errors.New("database unreachable")
	})
	publish(t, s, "flaky", true)
	waitFor(t, 10*time.Second, func() bool { return calls.Load() == 2 }, "the flaky message retried once and acked")
	publish(t, s, "broken", true)
	got := dlq(t, s, 1, 20*time.Second)
	if r := got[0].Header.Get(schemas.HeaderReason); !strings.Contains(r, "gave up after 3 deliveries: database unreachable") {
		t.Fatalf("reason %q", r)
	}
	if n := calls.Load(); n != 5 {
		t.Fatalf("handler calls=%d, want 2 + 3", n)
	}
}

// A process that dies holding the message never returns an error: the
// server stops delivering after MaxDeliver and says so in an advisory, which
// must still land the message in the DLQ.
func TestCrashLoopReachesDLQThroughAdvisory(t *testing.T) {
	t.Setenv(bus.EnvAckWait, "1s")
	s := bustest.New(t)
	var settled atomic.Int32
	// This consumer never pulls (its gate is shut): it only runs the
	// advisory watcher, as every live process of the role does.
	run(t, s, bus.ConsumerConfig{MaxDeliver: 2, Gate: func() bool { return false },
		OnDeadLetter: func(ctx context.Context, dl bus.DeadLetter) error { settled.Add(1); return nil }},
		func(ctx context.Context, msg jetstream.Msg) error { return msg.Ack() })
	seq := publish(t, s, "poison", true)
	// The "crashing process": pulls the message and dies without a word, twice.
	var cons jetstream.Consumer
	waitFor(t, 10*time.Second, func() bool {
		c, err := s.JS.Consumer(context.Background(), schemas.StreamBatches, "test")
		cons = c
		return err == nil
	}, "the consumer exists")
	// The "crashing process", restarted each time: pulls the message and
	// dies without a word. The server notices the last delivery's AckWait
	// run out while the consumer is being pulled on.
	var pulled atomic.Int32
	stopPulling := make(chan struct{})
	defer close(stopPulling)
	go func() {
		for {
			select {
			case <-stopPulling:
				return
			default:
			}
			b, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
			if err != nil {
				continue
			}
			for range b.Messages() {
				pulled.Add(1)
			}
		}
	}()
	got := dlq(t, s, 1, 20*time.Second)
	if r := got[0].Header.Get(schemas.HeaderReason); !strings.Contains(r, "never acknowledged") {
		t.Fatalf("reason %q", r)
	}
	if o := got[0].Header.Get(schemas.HeaderOrigin); !strings.HasPrefix(o, schemas.StreamBatches+":"+itoa(seq)+":") {
		t.Fatalf("origin %q", o)
	}
	waitFor(t, 5*time.Second, func() bool { return settled.Load() == 1 }, "OnDeadLetter ran")
	waitFor(t, 5*time.Second, func() bool { return streamMsgs(t, s, schemas.StreamBatches) == 0 }, "the message left the work queue")
	if n := pulled.Load(); n != 2 {
		t.Fatalf("delivered %d times, want MaxDeliver=2", n)
	}
}

// A handler that never returns keeps its message only for MaxWork; then the
// message is delivered again and, after MaxDeliver hangs, dead-lettered.
func TestHungHandlerReachesDLQ(t *testing.T) {
	s := bustest.New(t)
	block := make(chan struct{})
	defer close(block)
	var calls atomic.Int32
	run(t, s, bus.ConsumerConfig{AckWait: time.Second, MaxWork: 1500 * time.Millisecond, MaxDeliver: 2,
		Concurrency: 3, Grace: 100 * time.Millisecond},
		func(ctx context.Context, msg jetstream.Msg) error {
			calls.Add(1)
			select {
			case <-block:
			case <-ctx.Done():
			}
			return ctx.Err()
		})
	publish(t, s, "hangs", true)
	got := dlq(t, s, 1, 30*time.Second)
	if r := got[0].Header.Get(schemas.HeaderReason); !strings.Contains(r, "delivered 2 times") {
		t.Fatalf("reason %q", r)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("deliveries=%d, want 2", n)
	}
}

func TestShutdownReleasesInFlightWithinBound(t *testing.T) {
	s := bustest.New(t)
	started := make(chan struct{}, 1)
	stop := run(t, s, bus.ConsumerConfig{Grace: 300 * time.Millisecond, AckWait: time.Minute},
		func(ctx context.Context, msg jetstream.Msg) error {
			started <- struct{}{}
			<-ctx.Done() // work that only stops when told to
			return ctx.Err()
		})
	publish(t, s, "long", true)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("message never delivered")
	}
	if took := stop(); took > 3*time.Second {
		t.Fatalf("Consume took %v to stop, want about Grace", took)
	}
	// Released, not left to the one-minute AckWait: the next consumer gets it at once.
	got := make(chan string, 1)
	run(t, s, bus.ConsumerConfig{AckWait: time.Minute}, func(ctx context.Context, msg jetstream.Msg) error {
		got <- string(msg.Data())
		return msg.DoubleAck(ctx)
	})
	select {
	case d := <-got:
		if d != "long" {
			t.Fatalf("got %q", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the released message was not redelivered promptly")
	}
}

func TestRetryDelay(t *testing.T) {
	for n, want := range map[uint64]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 6: 32 * time.Second, 7: time.Minute, 100: time.Minute} {
		if got := bus.RetryDelay(n); got != want {
			t.Errorf("RetryDelay(%d)=%v, want %v", n, got, want)
		}
	}
}

func streamMsgs(t *testing.T, s *bustest.Server, name string) uint64 {
	t.Helper()
	str, err := s.JS.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func waitFor(t *testing.T, within time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
