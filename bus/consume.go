package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// permanentError marks a message that can never be processed.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent wraps err so the consumer dead-letters the message instead of
// retrying it: undecodable data, a wrong schema version.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was wrapped by Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Handler processes one message. Returning nil means the handler acked it.
// A Permanent error sends the message to the DLQ and terminates it; any other
// error naks it with a delay growing with the delivery count.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// ConsumerConfig is a durable pull consumer and how it is driven.
type ConsumerConfig struct {
	Stream  string
	Durable string
	Filter  string
	// AckWait is how long a delivery may go without an ack or InProgress.
	AckWait time.Duration
	// MaxDeliver bounds deliveries; the last failed one goes to the DLQ.
	MaxDeliver int
	// BackOff spaces redeliveries after an AckWait expiry (a crashed consumer).
	BackOff []time.Duration
	// Concurrency is the number of messages handled at once. Default 1.
	Concurrency int
	// Gate, when set, is asked before every fetch; false pauses pulling
	// (an open circuit breaker) without nak-ing anything.
	Gate func() bool
	// Grace bounds how long in-flight handlers may run after ctx ends.
	Grace  time.Duration
	Logger *slog.Logger
}

// Consume runs a durable pull consumer until ctx ends, then stops pulling and
// waits (at most Grace) for in-flight messages. Unfinished ones are simply
// redelivered later: nothing is lost.
func Consume(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, h Handler) error {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Grace == 0 {
		cfg.Grace = 20 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		FilterSubject: cfg.Filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		BackOff:       cfg.BackOff,
		MaxAckPending: cfg.Concurrency * 4,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", cfg.Durable, cfg.Stream, err)
	}
	// Handlers outlive ctx by Grace so in-flight work can finish and ack.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	sem := make(chan struct{}, cfg.Concurrency)
	defer func() {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(cfg.Grace):
			cfg.Logger.Warn("in-flight messages left for redelivery at shutdown", "consumer", cfg.Durable)
			cancelWork()
			<-done
		}
	}()
	for ctx.Err() == nil {
		if cfg.Gate != nil && !cfg.Gate() {
			sleep(ctx, 250*time.Millisecond)
			continue
		}
		free := cfg.Concurrency - len(sem)
		if free == 0 {
			select {
			case sem <- struct{}{}:
				<-sem
			case <-ctx.Done():
			}
			continue
		}
		batch, err := cons.Fetch(free, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			cfg.Logger.Warn("fetch", "consumer", cfg.Durable, "err", err)
			sleep(ctx, time.Second)
			continue
		}
		for msg := range batch.Messages() {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				handle(work, js, cfg, h, msg)
			}()
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil &&
			!errors.Is(err, jetstream.ErrNoMessages) {
			cfg.Logger.Debug("fetch batch", "consumer", cfg.Durable, "err", err)
		}
	}
	return nil
}

func handle(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, h Handler, msg jetstream.Msg) {
	defer func() {
		if p := recover(); p != nil {
			deadLetter(ctx, js, cfg, msg, fmt.Sprintf("handler panic: %v", p))
		}
	}()
	if v := msg.Headers().Get(schemas.HeaderSchema); v != schemas.Version {
		deadLetter(ctx, js, cfg, msg, fmt.Sprintf("schema version %q, want %q", v, schemas.Version))
		return
	}
	err := h(ctx, msg)
	if err == nil {
		return
	}
	meta, _ := msg.Metadata()
	delivered := uint64(1)
	if meta != nil {
		delivered = meta.NumDelivered
	}
	if IsPermanent(err) || (cfg.MaxDeliver > 0 && delivered >= uint64(cfg.MaxDeliver)) {
		reason := err.Error()
		if !IsPermanent(err) {
			reason = fmt.Sprintf("gave up after %d deliveries: %v", delivered, err)
		}
		deadLetter(ctx, js, cfg, msg, reason)
		return
	}
	delay := RetryDelay(delivered)
	cfg.Logger.Warn("message will be retried", "consumer", cfg.Durable, "task_id", msg.Headers().Get(schemas.HeaderTask),
		"delivery", delivered, "delay", delay, "err", err)
	msg.NakWithDelay(delay)
}

// RetryDelay is the nak delay after the n-th delivery: 1s, 2s, 4s … capped at 60s.
func RetryDelay(delivered uint64) time.Duration {
	if delivered > 7 {
		return time.Minute
	}
	d := time.Second << (delivered - 1)
	return min(d, time.Minute)
}

// deadLetter copies msg to the DLQ with the reason, then terminates it.
func deadLetter(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, msg jetstream.Msg, reason string) {
	meta, _ := msg.Metadata()
	var seq uint64
	if meta != nil {
		seq = meta.Sequence.Stream
	}
	out := &nats.Msg{
		Subject: schemas.SubjectDLQ + strings.ToLower(cfg.Stream) + "." + lastToken(msg.Subject()),
		Data:    msg.Data(),
		Header:  nats.Header{},
	}
	for k, v := range msg.Headers() {
		out.Header[k] = v
	}
	out.Header.Set(schemas.HeaderReason, reason)
	out.Header.Set(schemas.HeaderOrigin, cfg.Stream+":"+strconv.FormatUint(seq, 10)+":"+msg.Subject())
	if out.Header.Get(schemas.HeaderSchema) == "" {
		out.Header.Set(schemas.HeaderSchema, schemas.Version)
	}
	if _, err := js.PublishMsg(ctx, out, jetstream.WithMsgID(cfg.Stream+":"+strconv.FormatUint(seq, 10))); err != nil {
		// Without a DLQ copy, leave the message for redelivery rather than lose it.
		cfg.Logger.Error("dead-letter publish failed", "consumer", cfg.Durable, "err", err)
		msg.NakWithDelay(RetryDelay(5))
		return
	}
	cfg.Logger.Error("message dead-lettered", "consumer", cfg.Durable, "task_id", msg.Headers().Get(schemas.HeaderTask), "reason", reason)
	msg.Term()
}

func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// KeepAlive tells the server the message is still being worked on, every
// interval, until the returned stop function is called.
func KeepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				msg.InProgress()
			}
		}
	}()
	return func() { close(done) }
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
