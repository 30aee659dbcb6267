package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/schemas"
)

// The operations on the dead-letter queue that 'regressd dlq' offers: list,
// read, retry (back onto the original subject) and purge.

// DLQ is the dead-letter queue of a deployment.
type DLQ struct {
	js  jetstream.JetStream
	str jetstream.Stream
}

// OpenDLQ binds the dead-letter stream.
func OpenDLQ(ctx context.Context, js jetstream.JetStream) (*DLQ, error) {
	str, err := js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", schemas.StreamDLQ, err)
	}
	return &DLQ{js: js, str: str}, nil
}

// DeadLetterEntry is one dead letter, as listed.
type DeadLetterEntry struct {
	Seq        uint64    `json:"seq"`
	Time       time.Time `json:"time"`
	Subject    string    `json:"subject"`
	Origin     string    `json:"origin"`
	Consumer   string    `json:"consumer,omitempty"`
	Deliveries int       `json:"deliveries,omitempty"`
	TaskID     string    `json:"task_id,omitempty"`
	Reason     string    `json:"reason"`
	Bytes      int       `json:"bytes"`
}

// dlqStreams are the streams dead letters come from, by their short names.
var dlqStreams = map[string]string{"jobs": schemas.StreamJobs, "batches": schemas.StreamBatches, "results": schemas.StreamResults}

// DLQFilter is the subject filter of the dead letters from one stream
// (jobs, batches or results), or from every stream when stream is "".
func DLQFilter(stream string) (string, error) {
	if stream == "" {
		return schemas.SubjectDLQ + ">", nil
	}
	name, ok := dlqStreams[stream]
	if !ok {
		return "", fmt.Errorf("--stream %q: want jobs, batches or results", stream)
	}
	return schemas.SubjectDLQ + strings.ToLower(name) + ".>", nil
}

// ParseSeqs reads DLQ sequence numbers, as 'regressd dlq list' shows them.
func ParseSeqs(args []string) ([]uint64, error) {
	var out []uint64
	for _, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a DLQ sequence number (see 'regressd dlq list')", a)
		}
		out = append(out, n)
	}
	return out, nil
}

// List reads every dead letter on filter with an ordered consumer, keeping
// those keep accepts (all when nil).
func (q *DLQ) List(ctx context.Context, filter string, keep func(DeadLetterEntry) bool) ([]DeadLetterEntry, error) {
	cons, err := q.js.OrderedConsumer(ctx, schemas.StreamDLQ, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
	}
	var out []DeadLetterEntry
	err = ReadAll(ctx, cons, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
		e := entryOf(meta.Sequence.Stream, meta.Timestamp, msg.Subject(), msg.Headers(), len(msg.Data()))
		if keep == nil || keep(e) {
			out = append(out, e)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
	}
	return out, nil
}

// Select picks the dead letters on filter an operation acts on: seqs when
// given, every one otherwise, and of those only the ones dead-lettered
// longer than olderThan ago when it is not 0. Given seqs and no age, it
// returns them as they are (each is checked when acted on).
func (q *DLQ) Select(ctx context.Context, filter string, seqs []uint64, olderThan time.Duration) ([]uint64, error) {
	if len(seqs) > 0 && olderThan == 0 {
		return seqs, nil
	}
	cutoff := time.Now().Add(-olderThan)
	entries, err := q.List(ctx, filter, func(e DeadLetterEntry) bool {
		return (len(seqs) == 0 || slices.Contains(seqs, e.Seq)) && (olderThan == 0 || e.Time.Before(cutoff))
	})
	out := make([]uint64, len(entries))
	for i, e := range entries {
		out[i] = e.Seq
	}
	return out, err
}

// Get reads one dead letter whole. A sequence the DLQ does not hold (never
// used, or already retried or purged) is "no dead letter N" for every
// operation alike.
func (q *DLQ) Get(ctx context.Context, seq uint64) (DeadLetterEntry, *jetstream.RawStreamMsg, error) {
	raw, err := q.str.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetterEntry{}, nil, fmt.Errorf("no dead letter %d (see 'regressd dlq list')", seq)
	}
	if err != nil {
		return DeadLetterEntry{}, nil, fmt.Errorf("read dead letter %d: %w", seq, err)
	}
	return entryOf(raw.Sequence, raw.Time, raw.Subject, raw.Header, len(raw.Data)), raw, nil
}

func entryOf(seq uint64, ts time.Time, subject string, h nats.Header, size int) DeadLetterEntry {
	e := DeadLetterEntry{Seq: seq, Time: ts.UTC(), Subject: subject, Origin: h.Get(schemas.HeaderOrigin),
		Consumer: h.Get(HeaderConsumer), Reason: h.Get(schemas.HeaderReason), Bytes: size, TaskID: schemas.TaskIDOf(h)}
	e.Deliveries, _ = strconv.Atoi(h.Get(HeaderDeliveries))
	return e
}

// ShortOrigin is the origin's stream and sequence, without the subject.
func (e DeadLetterEntry) ShortOrigin() string {
	stream, rest, _ := strings.Cut(e.Origin, ":")
	seq, _, _ := strings.Cut(rest, ":")
	return stream + ":" + seq
}

// ShortReason is the reason on one line, cut to n bytes.
func (e DeadLetterEntry) ShortReason(n int) string { return truncate(e.Reason, n) }

// Retry puts a dead letter back on its original subject, as it came, and
// removes it from the DLQ; it returns that subject. A dead letter whose
// origin is not one of regressd's work streams, or whose original carried
// another schema version, is refused: its role would only refuse it again.
func (q *DLQ) Retry(ctx context.Context, seq uint64) (string, error) {
	_, raw, err := q.Get(ctx, seq)
	if err != nil {
		return "", err
	}
	stream, rest, _ := strings.Cut(raw.Header.Get(schemas.HeaderOrigin), ":")
	_, subject, _ := strings.Cut(rest, ":")
	if !originOK(stream, subject) {
		return "", fmt.Errorf("dead letter %d: origin %q is not a regressd stream and subject; purge it instead", seq, raw.Header.Get(schemas.HeaderOrigin))
	}
	if v := raw.Header.Get(schemas.HeaderSchema); v != schemas.Version {
		return "", fmt.Errorf("dead letter %d: the original message carried %s %q, not %q, so its role would refuse it again; purge it, and have its sender set the header", seq, schemas.HeaderSchema, v, schemas.Version)
	}
	m := &nats.Msg{Subject: subject, Data: raw.Data, Header: nats.Header{}}
	for k, v := range raw.Header {
		switch k {
		case schemas.HeaderReason, schemas.HeaderOrigin, HeaderConsumer, HeaderDeliveries, jetstream.MsgIDHeader:
			continue
		}
		m.Header[k] = v
	}
	if _, err := q.js.PublishMsg(ctx, m, jetstream.WithMsgID("dlq-retry:"+strconv.FormatUint(seq, 10))); err != nil {
		return "", fmt.Errorf("dead letter %d: republish: %w", seq, err)
	}
	if err := q.str.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return "", fmt.Errorf("dead letter %d: republished, but not removed from the DLQ: %w", seq, err)
	}
	return subject, nil
}

// originOK accepts only our own work streams and their subjects, so a retry
// cannot be pointed anywhere else.
func originOK(stream, subject string) bool {
	prefix := map[string]string{schemas.StreamJobs: schemas.SubjectJobs, schemas.StreamBatches: schemas.SubjectBatches,
		schemas.StreamResults: schemas.SubjectResults}[stream]
	return prefix != "" && strings.HasPrefix(subject, prefix) && len(subject) > len(prefix)
}

// Purge removes a dead letter.
func (q *DLQ) Purge(ctx context.Context, seq uint64) error {
	// Deleting a sequence the stream never held fails with a store error
	// ("stream store EOF"), not "not found": ask first.
	if _, _, err := q.Get(ctx, seq); err != nil {
		return err
	}
	if err := q.str.DeleteMsg(ctx, seq); err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("no dead letter %d (see 'regressd dlq list')", seq)
		}
		return fmt.Errorf("dead letter %d: %w", seq, err)
	}
	return nil
}

// DescribeBody renders a dead letter's body: indented JSON, an Arrow
// record's schema and size, or the first bytes.
func DescribeBody(b []byte) string {
	if len(b) == 0 {
		return "  (empty)"
	}
	var v any
	if json.Unmarshal(b, &v) == nil {
		out, _ := json.MarshalIndent(v, "  ", "  ")
		return "  " + string(out)
	}
	if rec, err := schemas.DecodeRecord(b, nil); err == nil {
		defer rec.Release()
		return fmt.Sprintf("  Arrow IPC record: %d rows; %s", rec.NumRows(), strings.ReplaceAll(rec.Schema().String(), "\n", "\n  "))
	}
	return fmt.Sprintf("  undecodable; first bytes: %q", truncate(string(b), 160))
}
