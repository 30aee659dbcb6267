package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/producer"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/worker"
	"github.com/regressd/regressd/writer"
)

type role string

const (
	roleScheduler role = "scheduler"
	roleProducer  role = "producer"
	roleWorker    role = "worker"
	roleWriter    role = "writer"
	roleGateway   role = "gateway"
)

var allRoles = []role{roleScheduler, roleProducer, roleWorker, roleWriter, roleGateway}

// roleCommand runs one or more roles in this process.
type roleCommand struct {
	m        *Main
	roles    []role
	name     string // the command line's word; empty derives it from roles
	synopsis string

	common       commonFlags
	predictor    string
	gatewayURL   string
	deviceMemory string
	concurrency  int
	waitTimeout  time.Duration
	gw           gateway.Config

	// httpURL is the engine API's base URL once it listens (for demo and tests).
	httpURL string
}

func (c *roleCommand) Synopsis() string { return c.synopsis }

func (c *roleCommand) has(r role) bool {
	for _, x := range c.roles {
		if x == r {
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
	c.common.registerHTTP(fs)
	c.common.registerGateway(fs)
	fs.StringVar(&c.predictor, "predictor", envOr("REGRESSD_PREDICTOR", "local"), "worker: 'local' (built-in engine) or 'remote' (a gateway at --gateway-url) (env REGRESSD_PREDICTOR)")
	fs.StringVar(&c.gatewayURL, "gateway-url", os.Getenv("REGRESSD_GATEWAY_URL"), "base URL of a /predict gateway: the worker's with --predictor remote, and the scheduler then accepts any model slug; https unless loopback (env REGRESSD_GATEWAY_URL)")
	fs.StringVar(&c.deviceMemory, "device-memory", envOr("REGRESSD_DEVICE_MEMORY", "24GiB"), "device memory the engine may plan for (e.g. 24GiB) (env REGRESSD_DEVICE_MEMORY)")
	fs.IntVar(&c.concurrency, "concurrency", 2, "messages each role handles at once")
	fs.DurationVar(&c.waitTimeout, "wait-timeout", 10*time.Minute, "scheduler: how long an engine call waits for its task before answering 202")
	fs.Int64Var(&c.gw.MaxBodyBytes, "max-body-bytes", gateway.DefaultMaxBodyBytes, "gateway: largest /predict body in bytes; larger gets 413")
	fs.Float64Var(&c.gw.RatePerMinute, "rate-per-minute", gateway.DefaultRatePerMinute, "gateway: requests per minute allowed per key; more gets 429 with Retry-After")
	fs.IntVar(&c.gw.RateBurst, "rate-burst", gateway.DefaultRateBurst, "gateway: requests a key may send back to back before the rate applies")
	fs.IntVar(&c.gw.MaxConcurrent, "max-concurrent", 2, "gateway: predictions computed at once")
	fs.IntVar(&c.gw.MaxQueue, "max-queue", 8, "gateway: requests that may wait for a prediction slot; more get 503 with Retry-After")

	demo := name == "demo" // listens on a free port and for no NATS clients
	used := map[string]bool{"data-dir": true, "log-level": true}
	use := func(on bool, names ...string) {
		for _, n := range names {
			used[n] = used[n] || on
		}
	}
	use(c.has(roleScheduler) || c.has(roleProducer) || c.has(roleWriter) || c.has(roleGateway), "database-url")
	use(c.needsBus(), "nats-url", "replicas")
	use(c.needsBus() && !demo, "nats-listen")
	use(!demo, "http-addr")
	use(c.has(roleWorker), "predictor")
	use(c.has(roleWorker) || c.has(roleScheduler), "gateway-url")
	use(c.has(roleWorker) || c.has(roleGateway), "device-memory")
	use(c.has(roleProducer) || c.has(roleWorker) || c.has(roleWriter), "concurrency")
	use(c.has(roleScheduler), "wait-timeout")
	use(c.has(roleGateway), "gateway-addr", "max-body-bytes", "rate-per-minute", "rate-burst", "max-concurrent", "max-queue")
	// Hidden are the role flags this command ignores; flags a caller adds
	// later (demo's --model) are shown.
	hidden := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { hidden[f.Name] = !used[f.Name] })
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: regressd %s [flags]\n\n%s.\n\nFlags:\n", name, c.synopsis)
		printFlags(fs, hidden)
		fmt.Fprint(w, "\nEnvironment:\n")
		if c.has(roleScheduler) {
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
	log := c.common.logger(c.m)
	st := &stack{log: log}
	defer st.close() // after cancel: waits for the roles, then closes what they used
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.start(ctx, st, log); err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}

// start brings up the bus, the database and every role; roles stop when ctx
// ends and start returns after wiring (the goroutines are owned by st).
func (c *roleCommand) start(ctx context.Context, st *stack, log *slog.Logger) error {
	tokens := splitList(os.Getenv("REGRESSD_AUTH_TOKENS"))
	if c.serves() && len(tokens) == 0 && !isLoopback(c.common.httpAddr) {
		return fmt.Errorf("--http-addr %s is not loopback and no REGRESSD_AUTH_TOKENS are set: set tokens to expose the API, or listen on 127.0.0.1", c.common.httpAddr)
	}
	if c.has(roleWorker) && c.predictor != "local" && c.predictor != "remote" {
		return fmt.Errorf("--predictor %q: want local or remote", c.predictor)
	}
	if c.has(roleWorker) && c.predictor == "remote" && c.gatewayURL == "" {
		return errors.New("--predictor remote needs --gateway-url")
	}
	var devMem int64
	if c.has(roleWorker) || c.has(roleGateway) {
		var err error
		if devMem, err = gpu.ParseBytes(c.deviceMemory); err != nil {
			return fmt.Errorf("--device-memory: %w", err)
		}
	}
	name := "regressd-" + strings.Join(roleNames(c.roles), "-")
	if c.needsBus() {
		if err := c.common.openBus(ctx, st, name); err != nil {
			return err
		}
	}
	if c.needsDB() {
		if err := c.m.openDatabase(ctx, &c.common, st); err != nil {
			return err
		}
		if st.cluster != nil {
			// Its port changes on every start; the URL holds no secret.
			log.Info("private postgres ready", "url", st.cluster.URL())
		}
	}
	sealer, err := c.sealer()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	var wg sync.WaitGroup
	st.onClose(wg.Wait)
	run := func(what string, f func(context.Context) error) { spawn(ctx, &wg, log, what, f) }
	models := c.modelCheck()
	if c.has(roleScheduler) {
		var tables scheduler.TableCheck
		var ledger scheduler.TaskLookup
		if st.pool != nil {
			tables = producer.TableCheck(tsdb.New(st.pool))
			ledger = func(ctx context.Context, id string) (schemas.TaskSummary, bool, error) {
				return writer.Summary(ctx, st.pool, id)
			}
		}
		s, err := scheduler.New(ctx, st.js, scheduler.Config{ServiceKey: os.Getenv("SERVICE_API_KEY"), AuthTokens: tokens,
			Models: models, Tables: tables, Tasks: ledger, Sealer: sealer, WaitTimeout: c.waitTimeout, Logger: log.With("role", "scheduler")})
		if err != nil {
			return err
		}
		s.Routes(mux)
		if err := mountUI(mux, s, st); err != nil {
			return err
		}
		st.metrics = append(st.metrics, func(w io.Writer) {
			fmt.Fprintf(w, "# TYPE regressd_schedule_ticks_total counter\nregressd_schedule_ticks_total %d\n", s.TicksFired.Load())
			fmt.Fprintf(w, "# TYPE regressd_schedule_ticks_skipped_total counter\nregressd_schedule_ticks_skipped_total %d\n", s.TicksSkipped.Load())
		})
		run("scheduler", s.Run)
	}
	if c.has(roleProducer) {
		p, err := producer.New(ctx, st.js, tsdb.New(st.pool), producer.Config{Concurrency: c.concurrency, Logger: log.With("role", "producer")})
		if err != nil {
			return err
		}
		run("producer", p.Run)
	}
	if c.has(roleWorker) {
		var pred worker.Predictor = worker.NewLocal(16, gpu.WithDevice(gpu.NewCPUDevice(devMem)), gpu.WithHostMemory(gpu.HostMemoryBytes()))
		if c.predictor == "remote" {
			if pred, err = worker.NewRemote(c.gatewayURL); err != nil {
				return fmt.Errorf("--gateway-url: %w", err)
			}
		}
		w, err := worker.New(ctx, st.js, worker.Config{Predictor: pred, PredictorName: c.predictor, Sealer: sealer, NeedKey: c.predictor == "remote",
			Concurrency: c.concurrency, Logger: log.With("role", "worker")})
		if err != nil {
			return err
		}
		st.metrics = append(st.metrics, func(out io.Writer) {
			fmt.Fprintf(out, "# TYPE regressd_worker_breaker_open gauge\nregressd_worker_breaker_open %d\n", map[bool]int{true: 1}[w.BreakerState().String() == "open"])
		})
		run("worker", w.Run)
	}
	if c.has(roleWriter) {
		w, err := writer.New(ctx, st.js, st.pool, writer.Config{Concurrency: 2 * c.concurrency, Logger: log.With("role", "writer")})
		if err != nil {
			return err
		}
		run("writer", w.Run)
	}
	health(mux, st)
	if err := c.serve(ctx, &wg, mux, c.common.httpAddr, "http", log); err != nil {
		return err
	}
	if c.has(roleGateway) {
		c.gw.DeviceMemoryBytes = devMem
		g, err := gateway.NewServer(c.gw, st.pool, log.With("role", "gateway"))
		if err != nil {
			return err
		}
		if err := c.serve(ctx, &wg, g.Handler(), c.common.gatewayAddr, "gateway", log); err != nil {
			return err
		}
	}
	log.Info("regressd ready", "roles", strings.Join(roleNames(c.roles), ","), "http", c.common.httpAddr, "embedded_nats", st.embedded != nil, "private_postgres", st.cluster != nil)
	return nil
}

func (c *roleCommand) serves() bool { return true }

func (c *roleCommand) needsBus() bool {
	return c.has(roleScheduler) || c.has(roleProducer) || c.has(roleWorker) || c.has(roleWriter)
}

// needsDB: the scheduler uses the database only to check tables when a
// trigger is created, so it gets one when given --database-url or when it
// runs beside roles that need one.
func (c *roleCommand) needsDB() bool {
	return c.has(roleProducer) || c.has(roleWriter) || c.has(roleGateway) || (c.has(roleScheduler) && c.common.databaseURL != "")
}

// modelCheck accepts built-in slugs, and any slug when a gateway is configured.
func (c *roleCommand) modelCheck() scheduler.ModelCheck {
	routable := c.gatewayURL != ""
	return func(slug string) error {
		if _, ok := gpu.LookupModel(slug); ok || routable {
			return nil
		}
		return fmt.Errorf("model %q is not built in (run 'regressd models') and no gateway is configured to route it to (--gateway-url)", slug)
	}
}

// sealer uses REGRESSD_SECRET, or a secret generated once under --data-dir.
func (c *roleCommand) sealer() (*schemas.Sealer, error) {
	if s := os.Getenv("REGRESSD_SECRET"); s != "" {
		return schemas.NewSealer([]byte(s))
	}
	if err := c.common.checkDataDir(); err != nil {
		return nil, err
	}
	p := filepath.Join(c.common.dataDir, "secret")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		raw := make([]byte, 32)
		rand.Read(raw)
		b = []byte(hex.EncodeToString(raw))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, fmt.Errorf("write deployment secret: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read deployment secret: %w", err)
	}
	return schemas.NewSealer(b)
}

// serve listens on addr and serves h until ctx ends, then shuts down gracefully.
func (c *roleCommand) serve(ctx context.Context, wg *sync.WaitGroup, h http.Handler, addr, what string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener on %s: %w (is another regressd running? pick another address)", what, addr, err)
	}
	if what == "http" {
		c.httpURL = "http://" + ln.Addr().String()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" server", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return nil
}

func roleNames(rs []role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// health serves /livez, /readyz and /metrics.
func health(mux *http.ServeMux, st *stack) {
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if st.nc != nil && !st.nc.IsConnected() {
			http.Error(w, "nats not connected", http.StatusServiceUnavailable)
			return
		}
		if st.pool != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := st.pool.Ping(ctx); err != nil {
				http.Error(w, "database not reachable", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if st.nc != nil {
			s := st.nc.Stats()
			fmt.Fprintf(w, "# TYPE regressd_nats_out_bytes_total counter\nregressd_nats_out_bytes_total %d\n", s.OutBytes)
			fmt.Fprintf(w, "# TYPE regressd_nats_in_bytes_total counter\nregressd_nats_in_bytes_total %d\n", s.InBytes)
		}
		if st.pool != nil {
			ps := st.pool.Stat()
			fmt.Fprintf(w, "# TYPE regressd_db_conns gauge\nregressd_db_conns %d\n", ps.TotalConns())
		}
		for _, f := range st.metrics {
			f(w)
		}
	})
}

// spawn runs f in a goroutine that wg owns, logging an error f returns
// before ctx ends (after it, stopping is the point).
func spawn(ctx context.Context, wg *sync.WaitGroup, log *slog.Logger, what string, f func(context.Context) error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := f(ctx); err != nil && ctx.Err() == nil {
			log.Error(what+" stopped", "err", err)
		}
	}()
}
