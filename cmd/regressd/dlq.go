package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
)

// dlqCommand inspects and repairs the dead-letter queue, talking to NATS
// directly.
type dlqCommand struct {
	m      *Main
	common commonFlags
}

func (c *dlqCommand) Synopsis() string {
	return "list, show, retry or purge the messages the pipeline gave up on"
}

const dlqUsage = `Usage:
  regressd dlq list  [--stream jobs|batches|results] [--json]
  regressd dlq show  SEQ
  regressd dlq retry (SEQ… | --all) [--stream …]
  regressd dlq purge (SEQ… | --all) [--stream …] [--older-than DURATION]

REGRESS_DLQ holds a copy of every message that could not be processed — an
undecodable message, a wrong schema version, one that failed or crashed its
handler on every delivery — with the reason. 'retry' puts messages back on
their original subject and removes them from the DLQ; 'purge' removes them.
SEQ is the DLQ sequence 'list' shows.

Talks to NATS directly: pass --nats-url for a running deployment (start
'regressd run' with --nats-listen to reach its embedded server); without it,
the embedded store under --data-dir is opened (regressd must be stopped).

Flags:
`

// dlqStreams maps --stream values to the stream names dead letters come from.
var dlqStreams = map[string]string{"jobs": schemas.StreamJobs, "batches": schemas.StreamBatches, "results": schemas.StreamResults}

// deadLetter is one DLQ entry, as list prints it.
type deadLetterEntry struct {
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

func (c *dlqCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dlq", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	c.common.existing = true
	c.common.registerDataDir(fs)
	c.common.registerBus(fs, false)
	stream := fs.String("stream", "", "only messages from this stream: jobs, batches or results")
	asJSON := fs.Bool("json", false, "list: one JSON array")
	all := fs.Bool("all", false, "retry, purge: every message (of --stream)")
	olderThan := fs.String("older-than", "", "purge: only messages dead-lettered longer ago than this (e.g. 7d, 12h)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), dlqUsage)
		fs.PrintDefaults()
	}
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	filter := schemas.SubjectDLQ + ">"
	if *stream != "" {
		name, ok := dlqStreams[*stream]
		if !ok {
			return fmt.Errorf("--stream %q: want jobs, batches or results", *stream)
		}
		filter = schemas.SubjectDLQ + strings.ToLower(name) + ".>"
	}
	seqs, err := parseSeqs(rest)
	if err != nil {
		return err
	}
	switch action {
	case "list", "show":
	case "retry", "purge":
		if len(seqs) == 0 && !*all {
			return fmt.Errorf("dlq %s needs sequence numbers or --all; run 'regressd dlq list' to see them", action)
		}
		if len(seqs) > 0 && *all {
			return fmt.Errorf("dlq %s: give sequence numbers or --all, not both", action)
		}
	default:
		return fmt.Errorf("unknown dlq action %q (want list, show, retry or purge); run 'regressd dlq -h'", action)
	}
	var age time.Duration
	if *olderThan != "" {
		d, err := schemas.ParseDuration(*olderThan)
		if err != nil {
			return fmt.Errorf("--older-than: %w", err)
		}
		age = time.Duration(d)
	}
	st := &stack{log: c.common.logger(c.m)}
	defer st.close()
	if err := c.common.openBus(ctx, st, "regressd-dlq"); err != nil {
		return err
	}
	str, err := st.js.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		return fmt.Errorf("open %s: %w", schemas.StreamDLQ, err)
	}
	switch action {
	case "list":
		entries, err := readDLQ(ctx, st.js, filter, nil)
		if err != nil {
			return err
		}
		return c.printList(entries, *asJSON)
	case "show":
		if len(seqs) != 1 {
			return errors.New("dlq show takes one sequence number")
		}
		return c.show(ctx, str, seqs[0])
	}
	targets := seqs
	if *all || age > 0 {
		cutoff := time.Time{}
		if age > 0 {
			cutoff = time.Now().Add(-age)
		}
		entries, err := readDLQ(ctx, st.js, filter, func(e deadLetterEntry) bool {
			return (len(seqs) == 0 || containsSeq(seqs, e.Seq)) && (cutoff.IsZero() || e.Time.Before(cutoff))
		})
		if err != nil {
			return err
		}
		targets = targets[:0]
		for _, e := range entries {
			targets = append(targets, e.Seq)
		}
	}
	if action == "purge" {
		return c.purge(ctx, str, targets)
	}
	return c.retry(ctx, st.js, str, targets)
}

func parseSeqs(args []string) ([]uint64, error) {
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

func containsSeq(seqs []uint64, s uint64) bool {
	for _, x := range seqs {
		if x == s {
			return true
		}
	}
	return false
}

// readDLQ reads every dead letter on filter with an ordered consumer, keeping
// those keep accepts (all when nil).
func readDLQ(ctx context.Context, js jetstream.JetStream, filter string, keep func(deadLetterEntry) bool) ([]deadLetterEntry, error) {
	cons, err := js.OrderedConsumer(ctx, schemas.StreamDLQ, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", schemas.StreamDLQ, err)
	}
	var out []deadLetterEntry
	err = bus.ReadAll(ctx, cons, func(msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
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

func entryOf(seq uint64, ts time.Time, subject string, h nats.Header, size int) deadLetterEntry {
	e := deadLetterEntry{Seq: seq, Time: ts.UTC(), Subject: subject, Origin: h.Get(schemas.HeaderOrigin),
		Consumer: h.Get(bus.HeaderConsumer), Reason: h.Get(schemas.HeaderReason), Bytes: size}
	e.Deliveries, _ = strconv.Atoi(h.Get(bus.HeaderDeliveries))
	e.TaskID = schemas.TaskIDOf(h)
	return e
}

func (c *dlqCommand) printList(entries []deadLetterEntry, asJSON bool) error {
	if asJSON {
		if entries == nil {
			entries = []deadLetterEntry{}
		}
		enc := json.NewEncoder(c.m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.m.Stdout, "the dead-letter queue is empty")
		return nil
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tDEAD-LETTERED\tFROM\tTASK\tREASON")
	for _, e := range entries {
		stream, rest, _ := strings.Cut(e.Origin, ":")
		seq, _, _ := strings.Cut(rest, ":")
		origin := stream + ":" + seq
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format(time.RFC3339), origin, orDash(e.TaskID), truncateText(e.Reason, 100))
	}
	tw.Flush()
	fmt.Fprintf(c.m.Stdout, "%d message(s); 'regressd dlq show SEQ' prints one whole\n", len(entries))
	return nil
}

// getDeadLetter reads one dead letter. A sequence the DLQ does not hold
// (never used, or already retried or purged) is "no dead letter N" for every
// action alike.
func getDeadLetter(ctx context.Context, str jetstream.Stream, seq uint64) (*jetstream.RawStreamMsg, error) {
	raw, err := str.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("no dead letter %d (see 'regressd dlq list')", seq)
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letter %d: %w", seq, err)
	}
	return raw, nil
}

func (c *dlqCommand) show(ctx context.Context, str jetstream.Stream, seq uint64) error {
	raw, err := getDeadLetter(ctx, str, seq)
	if err != nil {
		return err
	}
	e := entryOf(raw.Sequence, raw.Time, raw.Subject, raw.Header, len(raw.Data))
	w := c.m.Stdout
	fmt.Fprintf(w, "seq:          %d\ndead-letter:  %s\nsubject:      %s\norigin:       %s\nconsumer:     %s\ndeliveries:   %d\ntask:         %s\nreason:       %s\nheaders:\n",
		e.Seq, e.Time.Format(time.RFC3339Nano), e.Subject, e.Origin, orDash(e.Consumer), e.Deliveries, orDash(e.TaskID), e.Reason)
	for _, k := range sortedHeaderKeys(raw.Header) {
		for _, v := range raw.Header.Values(k) {
			fmt.Fprintf(w, "  %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(w, "body:         %d bytes\n", len(raw.Data))
	fmt.Fprintln(w, describeBody(raw.Data))
	return nil
}

// describeBody renders a body: indented JSON, an Arrow record's schema and
// size, or the first bytes.
func describeBody(b []byte) string {
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
	return fmt.Sprintf("  undecodable; first bytes: %q", truncateText(string(b), 160))
}

func (c *dlqCommand) retry(ctx context.Context, js jetstream.JetStream, str jetstream.Stream, seqs []uint64) error {
	var errs []error
	n := 0
	for _, seq := range seqs {
		raw, err := getDeadLetter(ctx, str, seq)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		stream, rest, _ := strings.Cut(raw.Header.Get(schemas.HeaderOrigin), ":")
		_, subject, _ := strings.Cut(rest, ":")
		if !originOK(stream, subject) {
			errs = append(errs, fmt.Errorf("dead letter %d: origin %q is not a regressd stream and subject; purge it instead", seq, raw.Header.Get(schemas.HeaderOrigin)))
			continue
		}
		if unversioned(raw.Header) {
			errs = append(errs, fmt.Errorf("dead letter %d: the original message carried %s %q, not %q, so its role would refuse it again; purge it, and have its sender set the header", seq, schemas.HeaderSchema, raw.Header.Get(schemas.HeaderSchema), schemas.Version))
			continue
		}
		m := &nats.Msg{Subject: subject, Data: raw.Data, Header: nats.Header{}}
		for k, v := range raw.Header {
			switch k {
			case schemas.HeaderReason, schemas.HeaderOrigin, bus.HeaderConsumer, bus.HeaderDeliveries, jetstream.MsgIDHeader:
				continue
			}
			m.Header[k] = v
		}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID("dlq-retry:"+strconv.FormatUint(seq, 10))); err != nil {
			errs = append(errs, fmt.Errorf("dead letter %d: republish: %w", seq, err))
			continue
		}
		if err := str.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			errs = append(errs, fmt.Errorf("dead letter %d: republished, but not removed from the DLQ: %w", seq, err))
			continue
		}
		fmt.Fprintf(c.m.Stdout, "retried %d onto %s\n", seq, subject)
		n++
	}
	fmt.Fprintf(c.m.Stdout, "%d message(s) retried\n", n)
	return errors.Join(errs...)
}

// unversioned tells a dead letter whose original had no schema version, or
// another than this build's (the DLQ copy keeps the original's headers as
// they were): its role would only refuse it again.
func unversioned(h nats.Header) bool { return h.Get(schemas.HeaderSchema) != schemas.Version }

// originOK accepts only our own work streams and their subjects, so a retry
// cannot be pointed anywhere else.
func originOK(stream, subject string) bool {
	prefix := map[string]string{schemas.StreamJobs: schemas.SubjectJobs, schemas.StreamBatches: schemas.SubjectBatches,
		schemas.StreamResults: schemas.SubjectResults}[stream]
	return prefix != "" && strings.HasPrefix(subject, prefix) && len(subject) > len(prefix)
}

func (c *dlqCommand) purge(ctx context.Context, str jetstream.Stream, seqs []uint64) error {
	var errs []error
	n := 0
	for _, seq := range seqs {
		// Deleting a sequence the stream never held fails with a store error
		// ("stream store EOF"), not "not found": ask first.
		if _, err := getDeadLetter(ctx, str, seq); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := str.DeleteMsg(ctx, seq); err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				err = fmt.Errorf("no dead letter %d (see 'regressd dlq list')", seq)
			} else {
				err = fmt.Errorf("dead letter %d: %w", seq, err)
			}
			errs = append(errs, err)
			continue
		}
		n++
	}
	fmt.Fprintf(c.m.Stdout, "%d message(s) purged\n", n)
	return errors.Join(errs...)
}

func sortedHeaderKeys(h nats.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncateText(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
