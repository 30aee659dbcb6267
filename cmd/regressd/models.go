package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
)

// modelsCommand lists the built-in model slugs.
type modelsCommand struct {
	m *Main
}

func (c *modelsCommand) Synopsis() string { return "list the built-in model slugs" }

func (c *modelsCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("models")
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("models takes no arguments, got %q", fs.Args())
	}
	tw := tabwriter.NewWriter(c.m.Stdout, 0, 4, 2, ' ', 0)
	for _, mi := range gpu.Models() {
		d := mi.Description
		if mi.Slug == gpu.DefaultModel {
			d += " (default)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", mi.Slug, d)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprint(c.m.Stdout, "\nAliases /predict accepts by default (regressd gateway --model-alias name=slug replaces them):\n")
	for _, l := range gateway.AliasLines(gateway.DefaultModelAliases()) {
		fmt.Fprintf(c.m.Stdout, "  %s\n", l)
	}
	return nil
}
