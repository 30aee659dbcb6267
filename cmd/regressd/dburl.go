package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/regressd/regressd/tsdb/pgcluster"
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

const databaseURLUsage = `Usage:
  regressd database-url [--data-dir DIR]

Prints the connection URL of the database regressd uses: --database-url when
given, else the private PostgreSQL cluster under --data-dir, which must be
running ('regressd run' with the same --data-dir). The URL holds no secret:
the cluster's password is read from the file its passfile= names, readable
only by the user regressd runs as. Use it with psql:

  psql "$(regressd database-url)" -c 'SELECT count(*) FROM weather'

Flags:
`

func (c *databaseURLCommand) Run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("database-url", flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	c.common.registerDataDir(fs)
	c.common.registerDatabase(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), databaseURLUsage)
		fs.PrintDefaults()
	}
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("database-url takes no arguments, got %q", fs.Args())
	}
	if c.common.DatabaseURL != "" {
		fmt.Fprintln(c.m.Stdout, c.common.DatabaseURL)
		return nil
	}
	if err := c.common.CheckExisting(); err != nil {
		return err
	}
	cl, err := pgcluster.Attach(ctx, pgcluster.Options{Dir: filepath.Join(c.common.DataDir, "postgres")})
	if errors.Is(err, pgcluster.ErrNotRunning) {
		return fmt.Errorf("no regressd is running on the data dir %s: start 'regressd run --data-dir %s' first", c.common.DataDir, c.common.DataDir)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(c.m.Stdout, cl.URL())
	return nil
}
