package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

const keysUsage = `Usage:
  regressd keys create NAME     print a new key for POST /predict (shown once)
  regressd keys list            every key, live and revoked
  regressd keys revoke NAME     refuse the key from now on (403)
  regressd keys usage [NAME]    requests, rows and tokens metered per key and model

The key is printed alone on stdout, so KEY=$(regressd keys create ci) works;
only its SHA-256 is stored. Send it as 'Authorization: Api-Key <key>'.

Flags:
`

func (c *keysCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	c.common.Existing = true
	c.common.registerDataDir(fs)
	c.common.registerDatabase(fs)
	since := fs.String("since", "", "usage: only UTC days on or after this date (YYYY-MM-DD)")
	byDay := fs.Bool("by-day", false, "usage: one line per UTC day")
	asJSON := fs.Bool("json", false, "list, usage: print JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), keysUsage)
		fs.PrintDefaults()
	}
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
			return writeKeysJSON(c, keys)
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
			return writeUsageJSON(c, rows, q.ByDay)
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

func writeKeysJSON(c *keysCommand, keys []gateway.Key) error {
	type keyJSON struct {
		Name     string     `json:"name"`
		KeyID    string     `json:"key_id"`
		Created  time.Time  `json:"created"`
		Revoked  *time.Time `json:"revoked"`
		LastUsed *time.Time `json:"last_used"`
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyJSON{k.Name, "rgd_" + k.LookupID, k.Created, k.Revoked, k.LastUsed})
	}
	enc := json.NewEncoder(c.m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writeUsageJSON(c *keysCommand, rows []gateway.UsageRow, byDay bool) error {
	type usageJSON struct {
		Day          string `json:"day,omitempty"`
		Name         string `json:"name"`
		KeyID        string `json:"key_id"`
		Model        string `json:"model"`
		Requests     int64  `json:"requests"`
		Errors       int64  `json:"errors"`
		ContextRows  int64  `json:"context_rows"`
		QueryRows    int64  `json:"query_rows"`
		InputTokens  int64  `json:"input_tokens"`
		OutputTokens int64  `json:"output_tokens"`
		TotalTokens  int64  `json:"total_tokens"`
	}
	out := make([]usageJSON, 0, len(rows))
	for _, r := range rows {
		u := usageJSON{Name: r.Name, KeyID: "rgd_" + r.LookupID, Model: r.Model, Requests: r.Requests, Errors: r.Errors,
			ContextRows: r.ContextRows, QueryRows: r.QueryRows, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			TotalTokens: r.InputTokens + r.OutputTokens}
		if byDay {
			u.Day = r.Day.Format(time.DateOnly)
		}
		out = append(out, u)
	}
	enc := json.NewEncoder(c.m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
