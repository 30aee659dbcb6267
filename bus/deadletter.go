package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// Headers a dead letter carries besides the original message's own
// (schemas.HeaderReason and schemas.HeaderOrigin say why and from where).
const (
	// HeaderConsumer names the consumer that gave up on the message.
	HeaderConsumer = "Regressd-Consumer"
	// HeaderDeliveries is how many times the message was delivered.
	HeaderDeliveries = "Regressd-Deliveries"
)

// StreamAdvisories captures the server's MAX_DELIVERIES advisories for
// regressd's streams, so a message whose handler crashed the process on every
// delivery still reaches the DLQ even when no process was listening then.
const StreamAdvisories = "REGRESS_ADVISORIES"

// advisoryPrefix is the subject the server publishes MAX_DELIVERIES
// advisories on, followed by ".<stream>.<consumer>".
const advisoryPrefix = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// advisorySubjects are the advisories StreamAdvisories keeps.
func advisorySubjects() []string {
	var out []string
	for _, s := range []string{schemas.StreamJobs, schemas.StreamBatches, schemas.StreamResults} {
		out = append(out, advisoryPrefix+s+".*")
	}
	return out
}

// DeadLetter is a message given up on, as copied to the DLQ.
type DeadLetter struct {
	Stream     string
	Seq        uint64
	Subject    string
	Header     nats.Header
	Data       []byte
	Reason     string
	Consumer   string
	Deliveries uint64
}

// DLQSubject is where a message of stream on subject is dead-lettered:
// regress.dlq.<stream, lower case>.<last token of subject>.
func DLQSubject(stream, subject string) string {
	return schemas.SubjectDLQ + strings.ToLower(stream) + "." + lastToken(subject)
}

// DLQMsgID is a dead letter's message id: one copy per original message,
// however many times it is given up on.
func DLQMsgID(stream string, seq uint64) string { return stream + ":" + strconv.FormatUint(seq, 10) }

// publishDeadLetter copies dl to the DLQ with its reason and origin.
func publishDeadLetter(ctx context.Context, js jetstream.JetStream, dl DeadLetter) error {
	out := &nats.Msg{Subject: DLQSubject(dl.Stream, dl.Subject), Data: dl.Data, Header: nats.Header{}}
	for k, v := range dl.Header {
		if k == jetstream.MsgIDHeader {
			continue // the copy has its own id; a retry gets a new one
		}
		out.Header[k] = v
	}
	out.Header.Set(schemas.HeaderReason, dl.Reason)
	out.Header.Set(schemas.HeaderOrigin, dl.Stream+":"+strconv.FormatUint(dl.Seq, 10)+":"+dl.Subject)
	out.Header.Set(HeaderConsumer, dl.Consumer)
	out.Header.Set(HeaderDeliveries, strconv.FormatUint(dl.Deliveries, 10))
	// The original's headers go as they were, schema version included or
	// not, so that 'regressd dlq retry' sends back exactly what came.
	if _, err := js.PublishMsg(ctx, out, jetstream.WithMsgID(DLQMsgID(dl.Stream, dl.Seq))); err != nil {
		return fmt.Errorf("dead-letter publish: %w", err)
	}
	return nil
}

// deadLetter copies msg to the DLQ with the reason, lets the role settle its
// task, then terminates it. If either step fails the message is left for
// redelivery rather than lost. class is the reason's bounded class, for
// the dead-letter counter.
func deadLetter(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, msg jetstream.Msg, class DeadLetterReason, reason string) {
	dl := DeadLetter{Stream: cfg.Stream, Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data(),
		Reason: reason, Consumer: cfg.Durable, Deliveries: 1}
	if meta, _ := msg.Metadata(); meta != nil {
		dl.Seq, dl.Deliveries = meta.Sequence.Stream, meta.NumDelivered
	}
	log := cfg.Logger.With("consumer", cfg.Durable, "task_id", schemas.TaskIDOf(dl.Header), "seq", dl.Seq)
	if err := publishDeadLetter(ctx, js, dl); err != nil {
		log.Error("dead-letter publish failed; message left for redelivery", "err", err)
		msg.NakWithDelay(RetryDelay(5))
		return
	}
	if cfg.OnDeadLetter != nil {
		if err := cfg.OnDeadLetter(ctx, dl); err != nil {
			log.Error("dead-lettered message not settled; left for redelivery", "err", err)
			msg.NakWithDelay(RetryDelay(5))
			return
		}
	}
	cfg.countDeadLetter(cfg.Stream, class)
	log.Error("message dead-lettered", "reason", reason)
	msg.TermWithReason(truncate(reason, 200))
}

// deliveryAdvisory is the server's MAX_DELIVERIES advisory.
type deliveryAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchMaxDeliveries dead-letters the messages cfg's consumer stopped
// delivering because every delivery went unacknowledged: the handler crashed
// the process or hung past MaxWork each time. It consumes the captured
// advisories with a durable of its own until ctx ends.
func watchMaxDeliveries(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig) {
	wcfg := ConsumerConfig{
		Stream: StreamAdvisories, Durable: "maxdeliver_" + cfg.Durable,
		Filter:  advisoryPrefix + cfg.Stream + "." + cfg.Durable,
		AckWait: cfg.AckWait, MaxDeliver: 20, Concurrency: 1, Grace: cfg.Grace, Logger: cfg.Logger, raw: true,
	}
	err := Consume(ctx, js, wcfg, func(ctx context.Context, msg jetstream.Msg) error {
		var adv deliveryAdvisory
		if err := json.Unmarshal(msg.Data(), &adv); err != nil || adv.StreamSeq == 0 {
			return Permanent(fmt.Errorf("unreadable max-deliveries advisory: %v", err))
		}
		str, err := js.Stream(ctx, adv.Stream)
		if err != nil {
			return fmt.Errorf("stream %s: %w", adv.Stream, err)
		}
		raw, err := str.GetMsg(ctx, adv.StreamSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return msg.DoubleAck(ctx) // acked late, or settled by another process
		}
		if err != nil {
			return fmt.Errorf("read %s message %d: %w", adv.Stream, adv.StreamSeq, err)
		}
		dl := DeadLetter{Stream: adv.Stream, Seq: adv.StreamSeq, Subject: raw.Subject, Header: raw.Header,
			Data: raw.Data, Consumer: adv.Consumer, Deliveries: adv.Deliveries,
			Reason: fmt.Sprintf("delivered %d times and never acknowledged (max_deliver %d): the %s consumer crashed or hung on it every time",
				adv.Deliveries, cfg.MaxDeliver, adv.Consumer)}
		if err := publishDeadLetter(ctx, js, dl); err != nil {
			return err
		}
		if cfg.OnDeadLetter != nil {
			if err := cfg.OnDeadLetter(ctx, dl); err != nil {
				return fmt.Errorf("settle dead letter: %w", err)
			}
		}
		cfg.countDeadLetter(adv.Stream, ReasonMaxDeliveries)
		cfg.Logger.Error("message dead-lettered", "consumer", adv.Consumer, "task_id", schemas.TaskIDOf(raw.Header),
			"seq", adv.StreamSeq, "reason", dl.Reason)
		// A work queue would keep the message forever; the jobs stream keeps
		// it for replay.
		if info := str.CachedInfo(); info != nil && info.Config.Retention == jetstream.WorkQueuePolicy {
			if err := str.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				cfg.Logger.Warn("dead-lettered message not removed from its work queue", "seq", adv.StreamSeq, "err", err)
			}
		}
		return msg.DoubleAck(ctx)
	})
	if err != nil && ctx.Err() == nil {
		cfg.Logger.Error("max-deliveries watcher stopped", "consumer", cfg.Durable, "err", err)
	}
}

func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// truncate puts s on one line and cuts it to n bytes.
// MaxLoggedError is the most of an error a log line or a dead letter's
// reason carries: an error quoting a megabyte of input stays a short line.
const MaxLoggedError = 1000

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
