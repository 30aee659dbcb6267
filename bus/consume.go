package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

// EnvAckWait names the environment variable that overrides every consumer's
// AckWait (a Go duration, at least 1s): how soon work held by a crashed
// process is delivered again. Every process of a deployment should agree.
const EnvAckWait = "REGRESSD_ACK_WAIT"

// Consumer defaults.
const (
	// DefaultAckWait bounds how long a message held by a crashed process waits
	// before redelivery. Live handlers are kept alive with InProgress.
	DefaultAckWait = 30 * time.Second
	// DefaultGrace is how long in-flight handlers may run after shutdown starts.
	DefaultGrace = 20 * time.Second
	// releaseWait is how long Consume waits, after Grace, for cancelled
	// handlers to release their messages before it returns anyway.
	releaseWait = 5 * time.Second
	// maxAckPending bounds unacked messages across every process sharing a
	// durable; processes pull only what they can handle, so this is a ceiling.
	maxAckPending = 1024
)

// ConsumerConfig is a durable pull consumer and how it is driven.
type ConsumerConfig struct {
	Stream  string
	Durable string
	Filter  string
	// AckWait is how long a delivery may go without an ack or InProgress
	// before the server delivers it again. Consume sends InProgress every
	// AckWait/3 while a handler runs, so AckWait bounds crash recovery, not
	// the length of the work. Default 30s; EnvAckWait overrides it.
	AckWait time.Duration
	// MaxDeliver bounds deliveries. The last failed one goes to the DLQ; a
	// message whose holder crashed on every delivery goes there too (through
	// the server's MAX_DELIVERIES advisory). Default 10.
	MaxDeliver int
	// BackOff, when set, replaces AckWait by per-delivery steps. Leave it
	// unset: the server measures a delayed nak from the BackOff step of the
	// delivery count rather than from AckWait, which stretches RetryDelay's
	// 2s into minutes. Crash redelivery every AckWait, bounded by MaxDeliver,
	// is the deliberate choice (see docs/DELIVERY.md).
	BackOff []time.Duration
	// MaxWork is how long one delivery may keep its message with InProgress.
	// A handler still running then is presumed hung: the server delivers the
	// message again, and after MaxDeliver such deliveries it is
	// dead-lettered. Default 30 min.
	MaxWork time.Duration
	// Concurrency is the number of messages handled at once. Default 1.
	Concurrency int
	// Gate, when set, is asked before every fetch; false pauses pulling
	// (an open circuit breaker) without nak-ing anything.
	Gate func() bool
	// Grace bounds how long in-flight handlers may run after ctx ends; then
	// they are cancelled and their messages released. Default 20s.
	Grace time.Duration
	// OnDeadLetter, when set, runs after a message was copied to the DLQ
	// (for any reason, max deliveries included) so the role can settle the
	// task the message belonged to. An error leaves the message to come back
	// and be settled again; it must therefore be idempotent.
	OnDeadLetter func(ctx context.Context, dl DeadLetter) error
	Logger       *slog.Logger
	// DeadLetters counts dead letters by stream and reason class
	// (*metrics.Metrics); nil counts nothing.
	DeadLetters DeadLetterCounter

	// raw skips the schema-version check (advisories carry none).
	raw bool
}

func (c *ConsumerConfig) setDefaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if v := os.Getenv(EnvAckWait); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= time.Second {
			c.AckWait, c.BackOff = d, nil
		} else {
			c.Logger.Warn("ignoring "+EnvAckWait+": want a duration of at least 1s", "value", v)
		}
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 10
	}
	if c.MaxWork == 0 {
		c.MaxWork = 30 * time.Minute
	}
	if len(c.BackOff) > 0 {
		// The server takes the first step as the AckWait and needs at least
		// as many deliveries as steps.
		c.BackOff = append([]time.Duration(nil), c.BackOff...)
		c.BackOff[0] = c.AckWait
		if c.MaxDeliver > 0 && len(c.BackOff) > c.MaxDeliver {
			c.BackOff = c.BackOff[:c.MaxDeliver]
		}
	}
}

// Consume runs a durable pull consumer until ctx ends, then stops pulling and
// waits (at most Grace) for in-flight messages; handlers still running are
// then cancelled and their messages released for redelivery, and Consume
// returns within a few seconds more. Nothing is lost either way.
func Consume(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, h Handler) error {
	cfg.setDefaults()
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		FilterSubject: cfg.Filter,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		BackOff:       cfg.BackOff,
		MaxAckPending: max(maxAckPending, cfg.Concurrency*4),
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", cfg.Durable, cfg.Stream, err)
	}
	// Handlers outlive ctx by Grace so in-flight work can finish and ack.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	if !cfg.raw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchMaxDeliveries(ctx, js, cfg)
		}()
	}
	sem := make(chan struct{}, cfg.Concurrency)
	defer func() {
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			return
		case <-time.After(cfg.Grace):
		}
		cfg.Logger.Warn("shutdown grace over: releasing in-flight messages for redelivery", "consumer", cfg.Durable, "grace", cfg.Grace)
		cancelWork()
		select {
		case <-done:
		case <-time.After(releaseWait):
			cfg.Logger.Warn("handlers did not stop; leaving their messages to AckWait", "consumer", cfg.Durable)
		}
	}()
	for ctx.Err() == nil {
		if cfg.Gate != nil && !cfg.Gate() {
			Sleep(ctx, 250*time.Millisecond)
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
			Sleep(ctx, time.Second)
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
	// Long work (a big window, a slow model) must not look like a crash.
	stop := keepAlive(msg, cfg.AckWait/3, cfg.MaxWork, func() {
		cfg.Logger.Warn("handler still running after MaxWork; letting the message be delivered again",
			"consumer", cfg.Durable, "task_id", schemas.TaskIDOf(msg.Headers()), "max_work", cfg.MaxWork)
	})
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			deadLetter(ctx, js, cfg, msg, ReasonPanic, fmt.Sprintf("handler panic: %v", p))
		}
	}()
	if v := msg.Headers().Get(schemas.HeaderSchema); !cfg.raw && v != schemas.Version {
		deadLetter(ctx, js, cfg, msg, ReasonSchemaVersion, fmt.Sprintf("schema version %q, want %q", v, schemas.Version))
		return
	}
	err := h(ctx, msg)
	if err == nil {
		return
	}
	taskID := schemas.TaskIDOf(msg.Headers())
	if ctx.Err() != nil && !IsPermanent(err) {
		// Cut off by shutdown: hand the message back now rather than after AckWait.
		cfg.Logger.Info("message released at shutdown", "consumer", cfg.Durable, "task_id", taskID)
		msg.Nak()
		return
	}
	meta, _ := msg.Metadata()
	delivered := uint64(1)
	if meta != nil {
		delivered = meta.NumDelivered
	}
	if IsPermanent(err) || (cfg.MaxDeliver > 0 && delivered >= uint64(cfg.MaxDeliver)) {
		reason, class := truncate(err.Error(), MaxLoggedError), ReasonPermanent
		if !IsPermanent(err) {
			reason, class = fmt.Sprintf("gave up after %d deliveries: %s", delivered, reason), ReasonGaveUp
		}
		deadLetter(ctx, js, cfg, msg, class, reason)
		return
	}
	delay := RetryDelay(delivered)
	var ri *retryIn
	if errors.As(err, &ri) {
		delay = ri.after
	}
	cfg.Logger.Warn("message will be retried", "consumer", cfg.Durable, "task_id", taskID,
		"delivery", delivered, "delay", delay, "err", truncate(err.Error(), MaxLoggedError))
	msg.NakWithDelay(delay)
}

// retryIn is an error whose message should come back after a delay of
// the handler's choosing.
type retryIn struct {
	err   error
	after time.Duration
}

func (r *retryIn) Error() string { return r.err.Error() }
func (r *retryIn) Unwrap() error { return r.err }

// RetryIn wraps a handler's transient error with the delay before its
// message comes back (a gateway's Retry-After, say), in place of
// RetryDelay's.
func RetryIn(err error, after time.Duration) error { return &retryIn{err: err, after: after} }

// RetryDelay is the nak delay after the n-th delivery: 1s, 2s, 4s … capped at 60s.
func RetryDelay(delivered uint64) time.Duration {
	if delivered < 1 {
		delivered = 1
	}
	if delivered > 7 {
		return time.Minute
	}
	d := time.Second << (delivered - 1)
	return min(d, time.Minute)
}

// KeepAlive tells the server the message is still being worked on, every
// interval, until the returned stop function is called.
func KeepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
	return keepAlive(msg, interval, 0, nil)
}

// keepAlive is KeepAlive that gives up after limit (0: never), calling expired.
func keepAlive(msg jetstream.Msg, interval, limit time.Duration, expired func()) (stop func()) {
	if interval <= 0 {
		interval = time.Second
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		var deadline <-chan time.Time
		if limit > 0 {
			deadline = time.After(limit)
		}
		for {
			select {
			case <-done:
				return
			case <-deadline:
				if expired != nil {
					expired()
				}
				return
			case <-t.C:
				msg.InProgress()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// Sleep waits d, or until ctx ends; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
