package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/pipeline"
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

func (c *dlqCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("dlq")
	c.common.Existing = true
	c.common.registerDataDir(fs)
	c.common.registerBus(fs, false)
	stream := fs.String("stream", "", "only messages from this stream: jobs, batches or results")
	asJSON := fs.Bool("json", false, "list: one JSON array")
	all := fs.Bool("all", false, "retry, purge: every message (of --stream)")
	olderThan := fs.String("older-than", "", "purge: only messages dead-lettered longer ago than this (e.g. 7d, 12h)")
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	filter, err := bus.DLQFilter(*stream)
	if err != nil {
		return err
	}
	seqs, err := bus.ParseSeqs(rest)
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
	st, err := pipeline.Open(ctx, c.common.Stores, "regressd-dlq", true, false, c.common.logger(c.m))
	if err != nil {
		return err
	}
	defer st.Close()
	q, err := bus.OpenDLQ(ctx, st.JS)
	if err != nil {
		return err
	}
	switch action {
	case "list":
		entries, err := q.List(ctx, filter, nil)
		if err != nil {
			return err
		}
		return c.printList(entries, *asJSON)
	case "show":
		if len(seqs) != 1 {
			return errors.New("dlq show takes one sequence number")
		}
		return c.show(ctx, q, seqs[0])
	}
	targets, err := q.Select(ctx, filter, seqs, age)
	if err != nil {
		return err
	}
	var errs []error
	n := 0
	for _, seq := range targets {
		if action == "purge" {
			err = q.Purge(ctx, seq)
		} else {
			var subject string
			if subject, err = q.Retry(ctx, seq); err == nil {
				fmt.Fprintf(c.m.Stdout, "retried %d onto %s\n", seq, subject)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	fmt.Fprintf(c.m.Stdout, "%d message(s) %s\n", n, map[string]string{"purge": "purged", "retry": "retried"}[action])
	return errors.Join(errs...)
}

func (c *dlqCommand) printList(entries []bus.DeadLetterEntry, asJSON bool) error {
	if asJSON {
		if entries == nil {
			entries = []bus.DeadLetterEntry{}
		}
		return c.m.printJSON(entries)
	}
	if len(entries) == 0 {
		fmt.Fprintln(c.m.Stdout, "the dead-letter queue is empty")
		return nil
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tDEAD-LETTERED\tFROM\tTASK\tREASON")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format(time.RFC3339), e.ShortOrigin(), orDash(e.TaskID), e.ShortReason(100))
	}
	tw.Flush()
	fmt.Fprintf(c.m.Stdout, "%d message(s); 'regressd dlq show SEQ' prints one whole\n", len(entries))
	return nil
}

func (c *dlqCommand) show(ctx context.Context, q *bus.DLQ, seq uint64) error {
	e, raw, err := q.Get(ctx, seq)
	if err != nil {
		return err
	}
	w := c.m.Stdout
	fmt.Fprintf(w, "seq:          %d\ndead-letter:  %s\nsubject:      %s\norigin:       %s\nconsumer:     %s\ndeliveries:   %d\ntask:         %s\nreason:       %s\nheaders:\n",
		e.Seq, e.Time.Format(time.RFC3339Nano), e.Subject, e.Origin, orDash(e.Consumer), e.Deliveries, orDash(e.TaskID), e.Reason)
	for _, k := range slices.Sorted(maps.Keys(raw.Header)) {
		for _, v := range raw.Header.Values(k) {
			fmt.Fprintf(w, "  %s: %s\n", k, v)
		}
	}
	fmt.Fprintf(w, "body:         %d bytes\n", len(raw.Data))
	fmt.Fprintln(w, bus.DescribeBody(raw.Data))
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
