package main

import "flag"

// parseAction parses a subcommand's flags wherever they stand among its
// positional words (`keys create NAME --json` and `keys --json create NAME`
// alike) and returns the first word as the action, the rest as its
// arguments. No words at all prints the usage and returns flag.ErrHelp.
func parseAction(fs *flag.FlagSet, args []string) (action string, rest []string, err error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return "", nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) == 0 {
		fs.Usage()
		return "", nil, flag.ErrHelp
	}
	return pos[0], pos[1:], nil
}
