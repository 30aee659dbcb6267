package main

import (
	"context"
	"fmt"
)

// databaseURLCommand prints the URL of a running deployment's PostgreSQL,
// so that psql "$(regressd database-url)" reaches the private cluster, whose
// port changes on every start.
type databaseURLCommand struct {
	m      *Main
	common commonFlags
}

func (c *databaseURLCommand) Synopsis() string {
	return "print the PostgreSQL URL of a running regressd, for psql"
}

func (c *databaseURLCommand) Run(ctx context.Context, args []string) error {
	fs := c.m.flagSet("database-url")
	c.common.registerDataDir(fs)
	c.common.registerDatabase(fs)
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("database-url takes no arguments, got %q", fs.Args())
	}
	url, err := c.common.DatabaseURLOfRunning(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(c.m.Stdout, url)
	return nil
}
