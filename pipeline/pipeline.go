package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/metrics"
	"github.com/regressd/regressd/producer"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tracing"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/worker"
	"github.com/regressd/regressd/writer"
)

// Pipeline is roles running in this process on one Stack. Every goroutine
// it starts is joined by Close.
type Pipeline struct {
	*Stack
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	url        string
	gatewayURL string
	triggers   *scheduler.Store
	// metrics is served on /metrics; the roles record in it.
	metrics *metrics.Metrics
	// tracing is the roles' tracer provider; ownTracing says Close shuts it down.
	tracing    *tracing.Provider
	ownTracing bool
}

// Start opens the stores the roles need and starts them; they run until
// ctx ends or Close is called. Start returns once every role is wired and
// its listeners listen.
func Start(ctx context.Context, cfg Config) (_ *Pipeline, err error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	names := make([]string, len(cfg.Roles))
	for i, r := range cfg.Roles {
		names[i] = string(r)
	}
	st, err := Open(ctx, cfg.Stores, "regressd-"+strings.Join(names, "-"), cfg.needsBus(), cfg.needsDB(), log)
	if err != nil {
		return nil, err
	}
	if st.Cluster != nil {
		// Its port changes on every start; the URL holds no secret.
		log.Info("private postgres ready", "url", st.Cluster.URL())
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Pipeline{Stack: st, cancel: cancel}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := p.observe(ctx, cfg, serviceName(names)); err != nil {
		return nil, err
	}
	m, tr := p.metrics, p.tracing
	sealer, err := cfg.Sealer(cfg.Secret, true)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	if cfg.has(Scheduler) {
		if err := p.startScheduler(ctx, cfg, sealer, mux); err != nil {
			return nil, err
		}
	}
	if cfg.has(Producer) {
		pr, err := producer.New(ctx, st.JS, tsdb.New(st.Pool), producer.Config{Concurrency: cfg.Concurrency, Logger: log.With("role", "producer"),
			Metrics: m, Tracing: tr})
		if err != nil {
			return nil, err
		}
		p.spawn(ctx, log, "producer", pr.Run)
	}
	if cfg.has(Worker) {
		if err := p.startWorker(ctx, cfg, sealer); err != nil {
			return nil, err
		}
	}
	if cfg.has(Writer) {
		w, err := writer.New(ctx, st.JS, st.Pool, writer.Config{Concurrency: 2 * cfg.Concurrency, Logger: log.With("role", "writer"),
			Metrics: m, Tracing: tr})
		if err != nil {
			return nil, err
		}
		p.spawn(ctx, log, "writer", w.Run)
	}
	p.routes(mux, cfg.Handlers, cfg.AuthTokens)
	if p.url, err = p.serve(ctx, p.instrument(metrics.ServerAPI, mux), cfg.HTTPAddr, "http",
		serverLimits{MaxBody: scheduler.MaxEngineBody, WriteTimeout: cfg.WaitTimeout + time.Minute, LoopbackNames: true}, log); err != nil {
		return nil, err
	}
	if cfg.has(Gateway) {
		gcfg := cfg.GatewayConfig
		gcfg.DeviceMemoryBytes = cfg.DeviceMemory
		gcfg.Metrics = m
		g, err := gateway.NewServer(gcfg, st.Pool, log.With("role", "gateway"))
		if err != nil {
			return nil, err
		}
		if p.gatewayURL, err = p.serve(ctx, p.instrument(metrics.ServerGateway, g.Handler()), cfg.GatewayAddr, "gateway", serverLimits{WriteTimeout: gatewayWriteTimeout}, log); err != nil {
			return nil, err
		}
		if err := m.WatchGatewayRefusals(g.Refusals); err != nil {
			return nil, err
		}
	}
	log.Info("regressd ready", "roles", strings.Join(names, ","), "http", cfg.HTTPAddr, "embedded_nats", st.Embedded != nil, "private_postgres", st.Cluster != nil)
	return p, nil
}

func (p *Pipeline) startScheduler(ctx context.Context, cfg Config, sealer *schemas.Sealer, mux *http.ServeMux) error {
	var tables scheduler.TableCheck
	var ledger scheduler.TaskLookup
	if pool := p.Pool; pool != nil {
		tables = producer.TableCheck(tsdb.New(pool))
		ledger = func(ctx context.Context, id string) (schemas.TaskSummary, bool, error) {
			return writer.Summary(ctx, pool, id)
		}
	}
	models := cfg.Models
	if models == nil {
		models = modelCheck(cfg.GatewayURL != "")
	}
	s, err := scheduler.New(ctx, p.JS, scheduler.Config{ServiceKey: cfg.ServiceKey, AuthTokens: cfg.AuthTokens,
		Models: models, Tables: tables, Tasks: ledger, Sealer: sealer, WaitTimeout: cfg.WaitTimeout, ConfigDir: cfg.ConfigDir,
		Logger: cfg.Logger.With("role", "scheduler"), Metrics: p.metrics, Tracing: p.tracing})
	if err != nil {
		return err
	}
	s.Routes(mux)
	if err := p.mountUI(mux, s, cfg.Logger); err != nil {
		return err
	}
	p.triggers = s.Store()
	p.spawn(ctx, cfg.Logger, "scheduler", s.Run)
	return nil
}

func (p *Pipeline) startWorker(ctx context.Context, cfg Config, sealer *schemas.Sealer) error {
	pred := cfg.Predict
	remote := cfg.Predict == nil && cfg.Predictor == PredictRemote
	switch {
	case remote:
		r, err := worker.NewRemote(cfg.GatewayURL)
		if err != nil {
			return fmt.Errorf("--gateway-url: %w", err)
		}
		r.Metrics = p.metrics
		pred = r
	case pred == nil:
		// The --concurrency batches in flight share the process's cores
		// (as the gateway's requests in the same process do): each Fit
		// and Predict holds one core and its loops take the free ones,
		// so one batch alone uses every core and several never
		// oversubscribe them.
		opts := append([]gpu.Option{gpu.WithDevice(gpu.NewCPUDevice(cfg.DeviceMemory)), gpu.WithHostMemory(gpu.HostMemoryBytes()),
			gpu.WithCorePool(gpu.DefaultCorePool())}, cfg.EngineOptions...)
		local := worker.NewLocal(16, opts...)
		local.Metrics = p.metrics
		pred = local
	}
	w, err := worker.New(ctx, p.JS, worker.Config{Predictor: pred, PredictorName: cfg.Predictor, Sealer: sealer, NeedKey: remote,
		Concurrency: cfg.Concurrency, Logger: cfg.Logger.With("role", "worker"), Metrics: p.metrics, Tracing: p.tracing})
	if err != nil {
		return err
	}
	if err := p.metrics.WatchBreaker(func() string { return w.BreakerState().String() }); err != nil {
		return err
	}
	p.spawn(ctx, cfg.Logger, "worker", w.Run)
	return nil
}

// modelCheck accepts built-in slugs and the vendor's names for them
// (gpu.ResolveModel, as the gateway's default aliases), and any slug when a
// gateway is configured to route it to.
func modelCheck(routable bool) scheduler.ModelCheck {
	return func(slug string) error {
		if _, ok := gpu.ResolveModel(slug); ok || routable {
			return nil
		}
		return fmt.Errorf("model %q is not built in (run 'regressd models') and no gateway is configured to route it to (--gateway-url)", slug)
	}
}

// URL is the base URL of the engine endpoint and admin API.
func (p *Pipeline) URL() string { return p.url }

// GatewayURL is the base URL of POST /predict; "" without the gateway role.
func (p *Pipeline) GatewayURL() string { return p.gatewayURL }

// Triggers is the trigger registry; nil without the scheduler role.
func (p *Pipeline) Triggers() *scheduler.Store { return p.triggers }

// Close stops every role, waits for each to return, and closes the stores.
// It may be called more than once.
func (p *Pipeline) Close() {
	p.once.Do(func() {
		p.cancel()
		p.wg.Wait()
		p.closeTracing()
		p.Stack.Close()
	})
}

// spawn runs f in a goroutine Close joins, logging an error f returns
// before ctx ends (after it, stopping is the point).
func (p *Pipeline) spawn(ctx context.Context, log *slog.Logger, what string, f func(context.Context) error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := f(ctx); err != nil && ctx.Err() == nil {
			log.Error(what+" stopped", "err", err)
		}
	}()
}
