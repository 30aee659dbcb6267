package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
)

// usageError is a wrong command line: the exit status is 2. An empty msg
// means the usage or the flag package already said what was wrong.
type usageError struct{ msg string }

func (e usageError) Error() string {
	if e.msg == "" {
		return "usage"
	}
	return e.msg
}

func usageErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

// exitCode is 0 for help asked for, 2 for a wrong command line, 1 otherwise.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// parse parses args into fs. Help asked for (-h, --help) prints the usage on
// stdout and returns flag.ErrHelp, a success; a bad flag prints the flag
// package's message and the usage on stderr and returns a usageError.
// Secret flags not given take their environment variables then. The
// fs.Usage of every command writes to fs.Output() for this.
func (m *Main) parse(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // printed below, on the stream that fits
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		m.printUsage(fs, m.Stdout)
		return err
	case err != nil:
		m.printUsage(fs, m.Stderr)
		return usageError{}
	}
	fromEnv(fs)
	return nil
}

func (m *Main) printUsage(fs *flag.FlagSet, w io.Writer) {
	out := fs.Output()
	fs.SetOutput(w)
	fs.Usage()
	fs.SetOutput(out)
}

// parseAction parses a subcommand's flags wherever they stand among its
// positional words (`keys create NAME --json` and `keys --json create NAME`
// alike) and returns the first word as the action, the rest as its
// arguments. No words at all prints the usage on stderr and returns a
// usageError.
func (m *Main) parseAction(fs *flag.FlagSet, args []string) (action string, rest []string, err error) {
	var pos []string
	for len(args) > 0 {
		if err := m.parse(fs, args); err != nil {
			return "", nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) == 0 {
		m.printUsage(fs, m.Stderr)
		return "", nil, usageError{}
	}
	return pos[0], pos[1:], nil
}

// printJSON prints v as indented JSON on stdout: a command's --json output.
func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// flagSet is a command's flag set; its usage is the command's help text
// (help/<name>.txt, formatted with args when given) and its flags.
func (m *Main) flagSet(name string, args ...any) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		text := help(name)
		if len(args) > 0 {
			text = fmt.Sprintf(text, args...)
		}
		fmt.Fprint(fs.Output(), text)
		fs.PrintDefaults()
	}
	return fs
}
