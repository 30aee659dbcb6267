// Command regressd fills gaps in PostgreSQL time-series tables with an
// in-context regression model, as an event-driven pipeline on NATS JetStream.
package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/regressd/regressd/pipeline"
)

// command is one subcommand of the binary.
type command interface {
	// Run parses args and runs the command until it is done or ctx ends.
	Run(ctx context.Context, args []string) error
	// Synopsis is the one-line description shown by `regressd help`.
	Synopsis() string
}

// Main holds the binary's streams so tests can run commands in-process.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
}

func main() {
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := m.Run(ctx, os.Args[1:])
	var ue usageError
	if err != nil && !errors.Is(err, flag.ErrHelp) && (!errors.As(err, &ue) || ue.msg != "") {
		fmt.Fprintln(m.Stderr, "regressd:", err)
	}
	stop()
	os.Exit(exitCode(err))
}

func (m *Main) commands() map[string]command {
	return map[string]command{
		"run":          &roleCommand{m: m, roles: pipeline.AllRoles, name: "run", synopsis: "run every role in one process (embedded NATS and PostgreSQL by default)"},
		"scheduler":    &roleCommand{m: m, roles: []pipeline.Role{pipeline.Scheduler}, synopsis: "run the scheduler: triggers, cron, the engine HTTP endpoint"},
		"producer":     &roleCommand{m: m, roles: []pipeline.Role{pipeline.Producer}, synopsis: "run the producer: read windows into Arrow batches"},
		"worker":       &roleCommand{m: m, roles: []pipeline.Role{pipeline.Worker}, synopsis: "run a worker: predict batches with the engine or a gateway"},
		"writer":       &roleCommand{m: m, roles: []pipeline.Role{pipeline.Writer}, synopsis: "run the writer: append predictions and the task ledger"},
		"gateway":      &roleCommand{m: m, roles: []pipeline.Role{pipeline.Gateway}, synopsis: "serve the hosted prediction API (POST /predict)"},
		"trigger":      &triggerCommand{m: m},
		"keys":         &keysCommand{m: m},
		"database-url": &databaseURLCommand{m: m},
		"demo":         &demoCommand{m: m},
		"replay":       &replayCommand{m: m},
		"dlq":          &dlqCommand{m: m},
		"models":       &modelsCommand{m: m},
		"eval":         &evalCommand{m: m},
		"bench":        &benchCommand{m: m},
		"task":         &taskCommand{m: m},
	}
}

// Run dispatches args to a subcommand.
func (m *Main) Run(ctx context.Context, args []string) error {
	cmds := m.commands()
	if len(args) == 0 {
		m.usage(m.Stderr, cmds)
		return usageError{}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) == 1 || len(args) == 2 && (args[1] == "-h" || args[1] == "--help" || args[1] == "-help") {
			m.usage(m.Stdout, cmds)
			return nil
		}
		if len(args) > 2 {
			return usageErrorf("help takes one command, got %q", args[1:])
		}
		c, ok := cmds[args[1]]
		if !ok {
			return usageErrorf("unknown command %q; run 'regressd help' for the list", args[1])
		}
		return c.Run(ctx, []string{"-h"})
	}
	c, ok := cmds[args[0]]
	if !ok {
		return usageErrorf("unknown command %q; run 'regressd help' for the list", args[0])
	}
	return c.Run(ctx, args[1:])
}

func (m *Main) usage(w io.Writer, cmds map[string]command) {
	fmt.Fprint(w, "regressd fills gaps in PostgreSQL time-series tables with an in-context regression model.\n\n")
	fmt.Fprint(w, "Usage:\n  regressd <command> [flags]\n\nCommands:\n")
	for _, n := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(w, "  %-13s %s\n", n, cmds[n].Synopsis())
	}
	fmt.Fprint(w, "\nRun 'regressd <command> -h' for a command's flags.\n")
}

// helpTexts are the commands' usage texts, help/<command>.txt, kept as
// text so they read and change as the prose they are.
//
//go:embed help/*.txt
var helpTexts embed.FS

// help is a command's usage text.
func help(command string) string {
	b, err := helpTexts.ReadFile("help/" + command + ".txt")
	if err != nil {
		panic("no help text for " + command) // a build without it is broken
	}
	return string(b)
}
