package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/regressd/regressd/scheduler"
)

// triggerCommand manages triggers through a running regressd's admin API.
type triggerCommand struct {
	m      *Main
	server string
	token  string
}

func (c *triggerCommand) Synopsis() string {
	return "create, list, show, delete, enable or disable triggers on a running regressd"
}

const triggerUsage = `Usage:
  regressd trigger create NAME --spec SPEC --args ARGS [--disabled]
  regressd trigger list
  regressd trigger show NAME
  regressd trigger delete NAME
  regressd trigger enable NAME
  regressd trigger disable NAME

SPEC is request:NAME (run by POST /api/v3/engine/NAME), every:DURATION (every:15m)
or cron:EXPR (5 fields, or 6 with seconds first).
ARGS is the comma-separated key=value list; lists are space-separated:
  measurement=weather,field=temp_max,feature_fields=temp_min wind,model=regressd/model-4l
Valid keys: %s.

Flags:
`

func (c *triggerCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.StringVar(&c.server, "server", envOr("REGRESSD_SERVER", "http://127.0.0.1:8181"), "regressd HTTP API (env REGRESSD_SERVER)")
	secretFlag(fs, &c.token, "token", "REGRESSD_AUTH_TOKEN", "Bearer token when the server has REGRESSD_AUTH_TOKENS")
	spec := fs.String("spec", "", "create: trigger spec")
	targs := fs.String("args", "", "create: trigger arguments")
	disabled := fs.Bool("disabled", false, "create: store the trigger disabled")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), triggerUsage, strings.Join(scheduler.ValidArgs(), ", "))
		fs.PrintDefaults()
	}
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	need := func(n int) error {
		if len(rest) != n {
			return usageErrorf("trigger %s takes %d name argument(s), got %d; run 'regressd trigger -h'", action, n, len(rest))
		}
		return nil
	}
	const base = "/api/v3/configure/processing_engine_trigger"
	switch action {
	case "create":
		if err := need(1); err != nil {
			return err
		}
		if *spec == "" {
			return errors.New("trigger create needs --spec (request:NAME, every:15m or cron:EXPR)")
		}
		body := map[string]any{"trigger_name": rest[0], "trigger_specification": *spec, "trigger_arguments": *targs, "disabled": *disabled}
		var t scheduler.Trigger
		if err := c.call(ctx, http.MethodPost, base, body, &t); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "created trigger %s (%s)\n", t.Name, t.Spec)
		if strings.HasPrefix(t.Spec, "request:") {
			fmt.Fprintf(c.m.Stdout, "run it: curl -X POST %s/api/v3/engine/%s -H \"X-Service-Api-Key: $SERVICE_API_KEY\" -d '{}'\n", c.server, strings.TrimPrefix(t.Spec, "request:"))
		}
		return nil
	case "list":
		if err := need(0); err != nil {
			return err
		}
		var out struct{ Triggers []scheduler.Trigger }
		if err := c.call(ctx, http.MethodGet, base, nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSPEC\tSTATE\tARGUMENTS")
		for _, t := range out.Triggers {
			state := "enabled"
			if t.Disabled {
				state = "disabled"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Spec, state, scheduler.FormatArgs(t.Args))
		}
		return tw.Flush()
	case "show":
		if err := need(1); err != nil {
			return err
		}
		var t scheduler.Trigger
		if err := c.call(ctx, http.MethodGet, base+"/"+url.PathEscape(rest[0]), nil, &t); err != nil {
			return err
		}
		return printTrigger(c.m.Stdout, t)
	case "delete":
		if err := need(1); err != nil {
			return err
		}
		if err := c.call(ctx, http.MethodDelete, base+"?trigger_name="+url.QueryEscape(rest[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "deleted trigger %s\n", rest[0])
		return nil
	case "enable", "disable":
		if err := need(1); err != nil {
			return err
		}
		if err := c.call(ctx, http.MethodPost, base+"/"+action+"?trigger_name="+url.QueryEscape(rest[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "%sd trigger %s\n", action, rest[0])
		return nil
	}
	return usageErrorf("unknown trigger action %q (create, list, show, delete, enable, disable)", action)
}

func printTrigger(w io.Writer, t scheduler.Trigger) error {
	state := "enabled"
	if t.Disabled {
		state = "disabled"
	}
	fmt.Fprintf(w, "name:     %s\nspec:     %s\nstate:    %s\ncreated:  %s\nupdated:  %s\narguments:\n",
		t.Name, t.Spec, state, t.Created.Format(time.RFC3339), t.Updated.Format(time.RFC3339))
	keys := make([]string, 0, len(t.Args))
	for k := range t.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s=%s\n", k, t.Args[k])
	}
	return nil
}

// call sends a JSON request to the admin API and decodes the answer.
func (c *triggerCommand) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.server, "/")+path, body)
	if err != nil {
		return fmt.Errorf("--server %q: %w", c.server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach regressd at %s: %w (is 'regressd run' running? set --server)", c.server, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if res.StatusCode >= 300 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		json.Unmarshal(data, &e)
		// regressd answers "error"; a gateway answers both, often the same text.
		msg := e.Error
		if e.Message != "" && e.Message != msg {
			msg = strings.TrimPrefix(msg+": "+e.Message, ": ")
		}
		if msg == "" {
			msg = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("%s (HTTP %d)", msg, res.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", c.server, err)
		}
	}
	return nil
}
