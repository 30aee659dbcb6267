package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/regressd/regressd/gateway"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/tracing"
	"github.com/regressd/regressd/worker"
)

// Role is one part of the pipeline that can run in this process.
type Role string

// The roles, in the order they start.
const (
	Scheduler Role = "scheduler"
	Producer  Role = "producer"
	Worker    Role = "worker"
	Writer    Role = "writer"
	Gateway   Role = "gateway"
)

// AllRoles are every role: what 'regressd run' starts.
var AllRoles = []Role{Scheduler, Producer, Worker, Writer, Gateway}

// Predictor names.
const (
	// PredictLocal predicts with the built-in engine in the worker.
	PredictLocal = "local"
	// PredictRemote predicts through a /predict gateway at GatewayURL.
	PredictRemote = "remote"
)

// Config says which roles to run and how.
type Config struct {
	Stores
	// Roles to run in this process. Required.
	Roles []Role
	// HTTPAddr serves the engine endpoint, the admin API, /livez, /readyz
	// and /metrics. Default 127.0.0.1:8181; "127.0.0.1:0" picks a port
	// (see Pipeline.URL).
	HTTPAddr string
	// GatewayAddr serves POST /predict when the gateway role runs.
	// Default 127.0.0.1:8080.
	GatewayAddr string
	// AuthTokens are the Bearer tokens of regressd's own API; without
	// them HTTPAddr must be loopback.
	AuthTokens []string
	// ServiceKey is the model-service key of scheduled runs.
	ServiceKey string
	// Secret is the deployment secret that seals keys on the bus; empty
	// uses (or generates) one under DataDir.
	Secret []byte
	// Predictor is PredictLocal (default) or PredictRemote.
	Predictor string
	// GatewayURL is the /predict gateway of PredictRemote; with it the
	// scheduler accepts any model slug.
	GatewayURL string
	// DeviceMemory is the device memory the engine may plan for, in
	// bytes. Default 24 GiB.
	DeviceMemory int64
	// Concurrency is the messages each role handles at once. Default 2.
	Concurrency int
	// WaitTimeout bounds how long an engine call waits for its task
	// before answering 202. Default 10 minutes.
	WaitTimeout time.Duration
	// ConfigDir is the directory a trigger's config_file_path is read
	// from (the scheduler's); empty: triggers cannot use config files.
	ConfigDir string
	// GatewayConfig configures the gateway role; its DeviceMemoryBytes
	// is DeviceMemory.
	GatewayConfig gateway.Config
	// Handlers are mounted on HTTPAddr's mux beside the roles' routes, by
	// pattern ("GET /ui/"); one that names a built-in pattern (/metrics)
	// replaces it.
	Handlers map[string]http.Handler
	// EngineOptions are passed to the worker's built-in engine (a shared
	// core pool, say), after the device and host memory.
	EngineOptions []gpu.Option
	// Predict replaces the worker's predictor; Models the scheduler's
	// model check. Both are for the benchmark, which predicts with a
	// router of its own.
	Predict worker.Predictor
	Models  scheduler.ModelCheck
	// Tracing is the roles' tracer provider (a test's in-memory one, say);
	// nil builds one from the environment: OTLP when
	// OTEL_EXPORTER_OTLP_ENDPOINT is set, nothing otherwise.
	Tracing *tracing.Provider
	// Logger receives every role's logs. Default: none.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.DataDir = cmp.Or(c.DataDir, "./regressd-data")
	c.HTTPAddr = cmp.Or(c.HTTPAddr, "127.0.0.1:8181")
	c.GatewayAddr = cmp.Or(c.GatewayAddr, "127.0.0.1:8080")
	c.Predictor = cmp.Or(c.Predictor, PredictLocal)
	c.DeviceMemory = cmp.Or(c.DeviceMemory, 24<<30)
	c.Concurrency = cmp.Or(c.Concurrency, 2)
	c.WaitTimeout = cmp.Or(c.WaitTimeout, 10*time.Minute)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem with the configuration at once.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Roles) == 0 {
		errs = append(errs, errors.New("no role to run"))
	}
	for _, r := range c.Roles {
		if !slices.Contains(AllRoles, r) {
			errs = append(errs, fmt.Errorf("unknown role %q", r))
		}
	}
	if len(c.AuthTokens) == 0 && !isLoopback(c.HTTPAddr) {
		errs = append(errs, fmt.Errorf("--http-addr %s is not loopback and no REGRESSD_AUTH_TOKENS are set: set tokens to expose the API, or listen on 127.0.0.1", c.HTTPAddr))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency %d: must be at least 1", c.Concurrency))
	}
	if c.WaitTimeout < 0 {
		errs = append(errs, fmt.Errorf("--wait-timeout %v: must not be negative", c.WaitTimeout))
	}
	if c.DeviceMemory < 0 {
		errs = append(errs, fmt.Errorf("--device-memory %d bytes: must not be negative", c.DeviceMemory))
	}
	if c.has(Gateway) {
		if err := c.GatewayConfig.Check(); err != nil {
			errs = append(errs, fmt.Errorf("gateway: %w", err))
		}
	}
	if c.has(Worker) && c.Predict == nil {
		switch {
		case c.Predictor != PredictLocal && c.Predictor != PredictRemote:
			errs = append(errs, fmt.Errorf("--predictor %q: want local or remote", c.Predictor))
		case c.Predictor == PredictRemote && c.GatewayURL == "":
			errs = append(errs, errors.New("--predictor remote needs --gateway-url"))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) has(r Role) bool { return slices.Contains(c.Roles, r) }

// needsBus: every role but the gateway meets the others on the bus.
func (c *Config) needsBus() bool {
	return c.has(Scheduler) || c.has(Producer) || c.has(Worker) || c.has(Writer)
}

// needsDB: the scheduler uses the database only to check tables when a
// trigger is created, so it gets one when given a DatabaseURL or when it
// runs beside roles that need one.
func (c *Config) needsDB() bool {
	return c.has(Producer) || c.has(Writer) || c.has(Gateway) || (c.has(Scheduler) && c.DatabaseURL != "")
}

// isLoopback reports whether addr listens only on the loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && gateway.IsLoopbackHost(host)
}
