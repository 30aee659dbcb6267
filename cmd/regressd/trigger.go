package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/regressd/regressd/scheduler"
)

// triggerCommand manages triggers through a running regressd's admin API.
type triggerCommand struct {
	m      *Main
	client scheduler.Client
}

func (c *triggerCommand) Synopsis() string {
	return "create, list, show, delete, enable or disable triggers on a running regressd"
}

func (c *triggerCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("trigger", strings.Join(scheduler.ValidArgs(), ", "))
	fs.StringVar(&c.client.Server, "server", envOr("REGRESSD_SERVER", "http://127.0.0.1:8181"), "regressd HTTP API, a URL or host:port (env REGRESSD_SERVER)")
	secretFlag(fs, &c.client.Token, "token", "REGRESSD_AUTH_TOKEN", "Bearer token when the server has REGRESSD_AUTH_TOKENS")
	spec := fs.String("spec", "", "create: trigger spec")
	targs := fs.String("args", "", "create: trigger arguments")
	disabled := fs.Bool("disabled", false, "create: store the trigger disabled")
	action, rest, err := c.m.parseAction(fs, args)
	if err != nil {
		return err
	}
	if n, ok := map[string]int{"create": 1, "list": 0, "show": 1, "delete": 1, "enable": 1, "disable": 1}[action]; ok && len(rest) != n {
		return usageErrorf("trigger %s takes %d name argument(s), got %d; run 'regressd trigger -h'", action, n, len(rest))
	}
	switch action {
	case "create":
		if *spec == "" {
			return errors.New("trigger create needs --spec (request:NAME, every:15m or cron:EXPR)")
		}
		t, err := c.client.CreateTrigger(ctx, rest[0], *spec, *targs, *disabled)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "created trigger %s (%s)\n", t.Name, t.Spec)
		if path, ok := strings.CutPrefix(t.Spec, "request:"); ok {
			fmt.Fprintf(c.m.Stdout, "run it: curl -X POST %s/api/v3/engine/%s -H \"X-Service-Api-Key: $SERVICE_API_KEY\" -H 'Content-Type: application/json' -d '{}'\n", c.client.URL(), path)
		}
		return nil
	case "list":
		ts, err := c.client.Triggers(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSPEC\tSTATE\tARGUMENTS")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Spec, state(t), scheduler.FormatArgs(t.Args))
		}
		return tw.Flush()
	case "show":
		t, err := c.client.Trigger(ctx, rest[0])
		if err != nil {
			return err
		}
		return printTrigger(c.m.Stdout, t)
	case "delete":
		if err := c.client.DeleteTrigger(ctx, rest[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "deleted trigger %s\n", rest[0])
		return nil
	case "enable", "disable":
		if err := c.client.SetDisabled(ctx, rest[0], action == "disable"); err != nil {
			return err
		}
		fmt.Fprintf(c.m.Stdout, "%sd trigger %s\n", action, rest[0])
		return nil
	}
	return usageErrorf("unknown trigger action %q (create, list, show, delete, enable, disable)", action)
}

func state(t scheduler.Trigger) string {
	if t.Disabled {
		return "disabled"
	}
	return "enabled"
}

func printTrigger(w io.Writer, t scheduler.Trigger) error {
	fmt.Fprintf(w, "name:     %s\nspec:     %s\nstate:    %s\ncreated:  %s\nupdated:  %s\narguments:\n",
		t.Name, t.Spec, state(t), t.Created.Format(time.RFC3339), t.Updated.Format(time.RFC3339))
	for _, k := range slices.Sorted(maps.Keys(t.Args)) {
		fmt.Fprintf(w, "  %s=%s\n", k, t.Args[k])
	}
	return nil
}
