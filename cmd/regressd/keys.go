package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/pipeline"
)

// keysCommand manages the gateway's API keys in the database.
type keysCommand struct {
	m      *Main
	common commonFlags
}

func (c *keysCommand) Synopsis() string {
	return "create, list or revoke gateway API keys, and show their usage"
}

func (c *keysCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("keys")
	c.common.Existing = true
	c.common.registerDataDir(fs)
	c.common.registerDatabase(fs)
	since := fs.String("since", "", "usage: only UTC days on or after this date (YYYY-MM-DD)")
	byDay := fs.Bool("by-day", false, "usage: one line per UTC day")
	asJSON := fs.Bool("json", false, "list, usage: print JSON")
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	var q gateway.UsageQuery
	switch action {
	case "create", "revoke":
		if len(rest) != 1 {
			return fmt.Errorf("keys %s takes one NAME, got %d arguments; run 'regressd keys -h'", action, len(rest))
		}
		if action == "create" {
			if err := gateway.ValidateKeyName(rest[0]); err != nil {
				return err
			}
		}
	case "list":
		if len(rest) != 0 {
			return fmt.Errorf("keys list takes no arguments, got %q", rest)
		}
	case "usage":
		if len(rest) > 1 {
			return fmt.Errorf("keys usage takes at most one NAME, got %q", rest)
		}
		if len(rest) == 1 {
			q.Name = rest[0]
		}
		if *since != "" {
			t, err := time.Parse(time.DateOnly, *since)
			if err != nil {
				return fmt.Errorf("--since %q: want YYYY-MM-DD", *since)
			}
			q.Since = t
		}
		q.ByDay = *byDay
	default:
		return fmt.Errorf("unknown keys action %q: want create, list, revoke or usage", action)
	}

	st, err := pipeline.Open(ctx, c.common.Stores, "", false, true, c.common.logger(c.m))
	if err != nil {
		return err
	}
	defer st.Close()
	ks := gateway.NewKeyStore(st.Pool)

	switch action {
	case "create":
		plain, k, err := ks.Create(ctx, rest[0])
		if errors.Is(err, gateway.ErrKeyExists) {
			return fmt.Errorf("a live key named %q exists; revoke it first or pick another name", rest[0])
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(c.m.Stdout, plain)
		fmt.Fprintf(c.m.Stderr, "created key %q (id rgd_%s_…); it is shown only this once, so store it now\n", k.Name, k.LookupID)
		return nil
	case "revoke":
		if err := ks.Revoke(ctx, rest[0]); errors.Is(err, gateway.ErrKeyNotFound) {
			return fmt.Errorf("no live key named %q (run 'regressd keys list')", rest[0])
		} else if err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "revoked key %q\n", rest[0])
		return nil
	case "list":
		keys, err := ks.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.m.printJSON(append([]gateway.Key{}, keys...))
		}
		tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKEY ID\tSTATE\tCREATED\tLAST USED")
		for _, k := range keys {
			state := "live"
			if k.Revoked != nil {
				state = "revoked " + k.Revoked.UTC().Format(time.DateOnly)
			}
			last := "never"
			if k.LastUsed != nil {
				last = k.LastUsed.UTC().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\trgd_%s_…\t%s\t%s\t%s\n", k.Name, k.LookupID, state, k.Created.UTC().Format(time.DateTime), last)
		}
		return tw.Flush()
	default: // usage
		rows, err := ks.Usage(ctx, q)
		if err != nil {
			return err
		}
		if *asJSON {
			return c.m.printJSON(append([]gateway.UsageRow{}, rows...))
		}
		if len(rows) == 0 {
			who := "any key"
			if q.Name != "" {
				who = fmt.Sprintf("key %q", q.Name)
			}
			fmt.Fprintf(c.m.Stdout, "no usage metered for %s\n", who)
			return nil
		}
		tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		head := "NAME\tKEY ID\tMODEL\tREQUESTS\tERRORS\tCONTEXT ROWS\tQUERY ROWS\tINPUT TOKENS\tOUTPUT TOKENS\t"
		if q.ByDay {
			head = "DAY\t" + head
		}
		fmt.Fprintln(tw, head)
		for _, r := range rows {
			model := r.Model
			if model == "" {
				model = "(refused)"
			}
			line := fmt.Sprintf("%s\trgd_%s_…\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t", r.Name, r.LookupID, model,
				r.Requests, r.Errors, r.ContextRows, r.QueryRows, r.InputTokens, r.OutputTokens)
			if q.ByDay {
				line = r.Day.Format(time.DateOnly) + "\t" + line
			}
			fmt.Fprintln(tw, line)
		}
		return tw.Flush()
	}
}
