package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/regressd/regressd/pipeline"
)

// commonFlags are shared by every role; each has an environment variable.
type commonFlags struct {
	pipeline.Stores
	httpAddr    string
	gatewayAddr string
	logLevel    slog.Level
	badEnvLevel string // REGRESSD_LOG_LEVEL when it names no level (logged at info, and said)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envString is a string flag that, when not given, takes an environment
// variable's value, read after parsing: never the flag's default, so -h
// never prints it. For flags whose values may hold secrets (a password in
// a URL, a token).
type envString struct {
	dst *string
	env string
}

func (e *envString) String() string {
	if e == nil || e.dst == nil {
		return ""
	}
	return *e.dst
}

func (e *envString) Set(v string) error { *e.dst = v; return nil }

// secretFlag registers a flag filled from env when not given; -h says at
// most that env is set.
func secretFlag(fs *flag.FlagSet, dst *string, name, env, usage string) {
	note := " (env " + env + ")"
	if os.Getenv(env) != "" {
		note = " (env " + env + ": set)"
	}
	fs.Var(&envString{dst: dst, env: env}, name, usage+note)
}

// fromEnv fills the secret flags not given on the command line from their
// environment variables.
func fromEnv(fs *flag.FlagSet) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if e, ok := f.Value.(*envString); ok && !given[f.Name] {
			*e.dst = os.Getenv(e.env)
		}
	})
}

// Each command registers only the flags it uses, so its -h lists no other.

// registerDataDir adds --data-dir and --log-level, which every command that
// touches regressd's state takes.
func (c *commonFlags) registerDataDir(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", envOr("REGRESSD_DATA_DIR", "./regressd-data"), "where the embedded NATS store and private PostgreSQL live (env REGRESSD_DATA_DIR)")
	c.logLevel = slog.LevelInfo
	if v := os.Getenv("REGRESSD_LOG_LEVEL"); v != "" && c.logLevel.UnmarshalText([]byte(v)) != nil {
		c.badEnvLevel = v
	}
	fs.TextVar(&c.logLevel, "log-level", c.logLevel, "log `level`: debug, info, warn or error (env REGRESSD_LOG_LEVEL)")
}

// registerDatabase adds --database-url.
func (c *commonFlags) registerDatabase(fs *flag.FlagSet) {
	secretFlag(fs, &c.DatabaseURL, "database-url", "REGRESSD_DATABASE_URL", "PostgreSQL URL; empty uses the private cluster under --data-dir (started by the roles and run, reused by the other commands)")
}

// registerBus adds --nats-url and --replicas; serve adds --nats-listen, for
// commands that keep the embedded server up for others to reach.
func (c *commonFlags) registerBus(fs *flag.FlagSet, serve bool) {
	secretFlag(fs, &c.NATSURL, "nats-url", "REGRESSD_NATS_URL", "NATS URL(s), comma-separated; empty runs an embedded JetStream server")
	fs.IntVar(&c.Replicas, "replicas", 1, "replicas of every stream: 1 on one machine, 3 in a cluster")
	if serve {
		fs.StringVar(&c.NATSListen, "nats-listen", os.Getenv("REGRESSD_NATS_LISTEN"), "host:port for the embedded NATS server to accept clients on; empty listens on no port (env REGRESSD_NATS_LISTEN)")
	}
}

func (c *commonFlags) logger(m *Main) *slog.Logger {
	if c.badEnvLevel != "" {
		// Only the environment can hold one: the flag checks its value.
		fmt.Fprintf(m.Stderr, "regressd: REGRESSD_LOG_LEVEL %q is not debug, info, warn or error; logging at %s\n", c.badEnvLevel, c.logLevel)
	}
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: c.logLevel}))
}
