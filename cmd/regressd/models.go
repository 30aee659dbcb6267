package main

import (
	"context"
	"fmt"
	"text/tabwriter"

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
	return tw.Flush()
}
