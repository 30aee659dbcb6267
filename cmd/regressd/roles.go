package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/pipeline"
)

// roleCommand runs one or more roles in this process.
type roleCommand struct {
	m        *Main
	roles    []pipeline.Role
	name     string // the command line's word; empty derives it from roles
	synopsis string

	common       commonFlags
	predictor    string
	gatewayURL   string
	deviceMemory string
	concurrency  int
	waitTimeout  time.Duration
	configDir    string
	gw           gateway.Config
}

func (c *roleCommand) Synopsis() string { return c.synopsis }

func (c *roleCommand) has(rs ...pipeline.Role) bool {
	for _, r := range rs {
		if slices.Contains(c.roles, r) {
			return true
		}
	}
	return false
}

// flags registers every role's flags, so one command line (a unit template,
// the fault harness) starts any role, but -h lists only those this command
// uses.
func (c *roleCommand) flags() *flag.FlagSet {
	name := c.name
	if name == "" {
		name = string(c.roles[0])
		if len(c.roles) > 1 {
			name = "run"
		}
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.m.Stderr)
	c.common.registerDataDir(fs)
	c.common.registerDatabase(fs)
	c.common.registerBus(fs, true)
	fs.StringVar(&c.common.httpAddr, "http-addr", envOr("REGRESSD_HTTP_ADDR", "127.0.0.1:8181"), "engine endpoint, admin API, metrics and health (env REGRESSD_HTTP_ADDR)")
	fs.StringVar(&c.common.gatewayAddr, "gateway-addr", envOr("REGRESSD_GATEWAY_ADDR", "127.0.0.1:8080"), "hosted prediction API, POST /predict (env REGRESSD_GATEWAY_ADDR)")
	fs.StringVar(&c.predictor, "predictor", envOr("REGRESSD_PREDICTOR", pipeline.PredictLocal), "worker: 'local' (built-in engine) or 'remote' (a gateway at --gateway-url) (env REGRESSD_PREDICTOR)")
	secretFlag(fs, &c.gatewayURL, "gateway-url", "REGRESSD_GATEWAY_URL", "base URL of a /predict gateway: the worker's with --predictor remote, and the scheduler then accepts any model slug; https unless loopback")
	fs.StringVar(&c.deviceMemory, "device-memory", envOr("REGRESSD_DEVICE_MEMORY", "24GiB"), "device memory the engine may plan for (e.g. 24GiB) (env REGRESSD_DEVICE_MEMORY)")
	fs.IntVar(&c.concurrency, "concurrency", 2, "messages each role handles at once")
	fs.DurationVar(&c.waitTimeout, "wait-timeout", 10*time.Minute, "scheduler: how long an engine call waits for its task before answering 202")
	fs.StringVar(&c.configDir, "config-dir", envOr("REGRESSD_CONFIG_DIR", ""), "scheduler: directory of the TOML files triggers name in config_file_path, which is never outside it (env REGRESSD_CONFIG_DIR)")
	gatewayFlags := c.gw.RegisterFlags(fs)

	demo := name == "demo" // listens on a free port and for no NATS clients
	bus := c.has(pipeline.Scheduler, pipeline.Producer, pipeline.Worker, pipeline.Writer)
	used := map[string]bool{"data-dir": true, "log-level": true,
		"database-url": c.has(pipeline.Scheduler, pipeline.Producer, pipeline.Writer, pipeline.Gateway),
		"nats-url":     bus, "replicas": bus, "nats-listen": bus && !demo, "http-addr": !demo,
		"predictor": c.has(pipeline.Worker), "gateway-url": c.has(pipeline.Worker, pipeline.Scheduler),
		"device-memory": c.has(pipeline.Worker, pipeline.Gateway), "concurrency": c.has(pipeline.Producer, pipeline.Worker, pipeline.Writer),
		"wait-timeout": c.has(pipeline.Scheduler), "config-dir": c.has(pipeline.Scheduler)}
	for _, n := range append(gatewayFlags, "gateway-addr") {
		used[n] = c.has(pipeline.Gateway)
	}
	// Hidden are the role flags this command ignores; flags a caller adds
	// later (demo's --model) are shown.
	hidden := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { hidden[f.Name] = !used[f.Name] })
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: regressd %s [flags]\n\n%s.\n\nFlags:\n", name, c.synopsis)
		printFlags(fs, hidden)
		fmt.Fprint(w, "\nEnvironment:\n")
		if c.has(pipeline.Scheduler) {
			fmt.Fprint(w, "  SERVICE_API_KEY       model-service key for scheduled runs\n")
		}
		fmt.Fprint(w, "  REGRESSD_SECRET       deployment secret shared by all roles; generated under --data-dir when unset\n")
		if !demo {
			fmt.Fprint(w, "  REGRESSD_AUTH_TOKENS  comma-separated Bearer tokens for regressd's own API; without them --http-addr must be loopback\n")
		}
	}
	return fs
}

// printFlags prints the defaults of the flags of fs but the hidden ones.
func printFlags(fs *flag.FlagSet, hidden map[string]bool) {
	doc := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	doc.SetOutput(fs.Output())
	fs.VisitAll(func(f *flag.Flag) {
		if !hidden[f.Name] {
			doc.Var(f.Value, f.Name, f.Usage)
			doc.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	doc.PrintDefaults()
}

func (c *roleCommand) Run(ctx context.Context, args []string) error {
	fs := c.flags()
	if err := c.m.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q; run 'regressd %s -h'", fs.Arg(0), fs.Name())
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	p, err := pipeline.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close() // stops the roles, waits for them, then closes what they used
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	return nil
}

// config is the pipeline the flags and the environment describe.
func (c *roleCommand) config() (pipeline.Config, error) {
	cfg := pipeline.Config{Stores: c.common.Stores, Roles: c.roles, HTTPAddr: c.common.httpAddr, GatewayAddr: c.common.gatewayAddr,
		AuthTokens: strings.FieldsFunc(os.Getenv("REGRESSD_AUTH_TOKENS"), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }), ServiceKey: os.Getenv("SERVICE_API_KEY"),
		Secret: []byte(os.Getenv("REGRESSD_SECRET")), Predictor: c.predictor, GatewayURL: c.gatewayURL,
		Concurrency: c.concurrency, WaitTimeout: c.waitTimeout, ConfigDir: c.configDir, GatewayConfig: c.gw, Logger: c.common.logger(c.m)}
	if c.has(pipeline.Worker, pipeline.Gateway) {
		var err error
		if cfg.DeviceMemory, err = gpu.ParseBytes(c.deviceMemory); err != nil {
			return cfg, fmt.Errorf("--device-memory: %w", err)
		}
	}
	return cfg, nil
}
