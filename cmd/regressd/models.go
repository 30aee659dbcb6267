package main

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/regressd/regressd/gpu"
)

// modelsCommand lists the built-in model slugs.
type modelsCommand struct {
	m *Main
}

func (c *modelsCommand) Synopsis() string { return "list the built-in model slugs" }

const modelsUsage = `Usage:
  regressd models

Prints one built-in model slug per line with a short description. The slug
goes in a trigger's model= argument or a /predict request's "model" field.
`

func (c *modelsCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), modelsUsage) }
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
