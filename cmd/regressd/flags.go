package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgcluster"
)

// commonFlags are shared by every role; each has an environment variable.
type commonFlags struct {
	dataDir     string
	databaseURL string
	natsURL     string
	natsListen  string
	httpAddr    string
	gatewayAddr string
	replicas    int
	logLevel    string
	// existing: the command only uses the store of a deployment (keys, dlq,
	// replay), so it refuses to create an empty one under --data-dir.
	existing bool
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Each command registers only the flags it uses, so its -h lists no other.

// registerDataDir adds --data-dir and --log-level, which every command that
// touches regressd's state takes.
func (c *commonFlags) registerDataDir(fs *flag.FlagSet) {
	fs.StringVar(&c.dataDir, "data-dir", envOr("REGRESSD_DATA_DIR", "./regressd-data"), "where the embedded NATS store and private PostgreSQL live (env REGRESSD_DATA_DIR)")
	fs.StringVar(&c.logLevel, "log-level", envOr("REGRESSD_LOG_LEVEL", "info"), "debug, info, warn or error (env REGRESSD_LOG_LEVEL)")
}

// registerDatabase adds --database-url.
func (c *commonFlags) registerDatabase(fs *flag.FlagSet) {
	fs.StringVar(&c.databaseURL, "database-url", os.Getenv("REGRESSD_DATABASE_URL"), "PostgreSQL URL; empty runs a private cluster under --data-dir (env REGRESSD_DATABASE_URL)")
}

// registerBus adds --nats-url and --replicas; serve adds --nats-listen, for
// commands that keep the embedded server up for others to reach.
func (c *commonFlags) registerBus(fs *flag.FlagSet, serve bool) {
	fs.StringVar(&c.natsURL, "nats-url", os.Getenv("REGRESSD_NATS_URL"), "NATS URL(s), comma-separated; empty runs an embedded JetStream server (env REGRESSD_NATS_URL)")
	fs.IntVar(&c.replicas, "replicas", 1, "replicas of every stream: 1 on one machine, 3 in a cluster")
	if serve {
		fs.StringVar(&c.natsListen, "nats-listen", os.Getenv("REGRESSD_NATS_LISTEN"), "host:port for the embedded NATS server to accept clients on; empty listens on no port (env REGRESSD_NATS_LISTEN)")
	}
}

// registerHTTP adds --http-addr.
func (c *commonFlags) registerHTTP(fs *flag.FlagSet) {
	fs.StringVar(&c.httpAddr, "http-addr", envOr("REGRESSD_HTTP_ADDR", "127.0.0.1:8181"), "engine endpoint, admin API, metrics and health (env REGRESSD_HTTP_ADDR)")
}

// registerGateway adds --gateway-addr.
func (c *commonFlags) registerGateway(fs *flag.FlagSet) {
	fs.StringVar(&c.gatewayAddr, "gateway-addr", envOr("REGRESSD_GATEWAY_ADDR", "127.0.0.1:8080"), "hosted prediction API, POST /predict (env REGRESSD_GATEWAY_ADDR)")
}

func (c *commonFlags) logger(m *Main) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// checkExisting refuses a data dir that holds no sub (postgres or nats) for a
// command that only uses an existing store: creating one there would leave
// the running server's store untouched and the user misled. alt names the
// flag that reaches the store without a data dir.
func (c *commonFlags) checkExisting(sub, alt string) error {
	if !c.existing {
		return nil
	}
	if fi, err := os.Stat(c.dataDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("no regressd data dir at %s: pass --data-dir (or REGRESSD_DATA_DIR) of the running server, or %s", c.dataDir, alt)
	}
	if fi, err := os.Stat(filepath.Join(c.dataDir, sub)); err != nil || !fi.IsDir() {
		return fmt.Errorf("the regressd data dir %s holds no %s store: pass --data-dir (or REGRESSD_DATA_DIR) of the running server, or %s", c.dataDir, sub, alt)
	}
	return nil
}

// checkDataDir makes sure the data dir can be written, with a fix in the error.
func (c *commonFlags) checkDataDir() error {
	if err := os.MkdirAll(c.dataDir, 0o755); err != nil {
		return fmt.Errorf("data dir %s: %w (choose a writable --data-dir)", c.dataDir, err)
	}
	probe := filepath.Join(c.dataDir, ".write-test")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w (choose a writable --data-dir)", c.dataDir, err)
	}
	return os.Remove(probe)
}

// stack is what every role needs: a JetStream connection and maybe a
// database, with the embedded servers behind them when no URLs were given.
type stack struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	pool     *pgxpool.Pool
	embedded *bus.Embedded
	cluster  *pgcluster.Cluster
	log      *slog.Logger
	waits    []func()
	// metrics write role-specific Prometheus lines on /metrics.
	metrics []func(w io.Writer)
}

// onClose registers f to run first in close: waiting for roles to stop.
func (s *stack) onClose(f func()) { s.waits = append(s.waits, f) }

// close stops everything in reverse order of start.
func (s *stack) close() {
	for _, f := range s.waits {
		f()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.nc != nil {
		s.nc.Drain()
		s.nc.Close()
	}
	if s.embedded != nil {
		s.embedded.Shutdown()
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(); err != nil {
			s.log.Warn("stop private postgres", "err", err)
		}
	}
}

// openBus connects to NATS (or starts the embedded server) and ensures the streams.
func (c *commonFlags) openBus(ctx context.Context, s *stack, name string) error {
	var err error
	if c.natsURL == "" {
		if err := c.checkExisting("nats", "--nats-url"); err != nil {
			return err
		}
		if err := c.checkDataDir(); err != nil {
			return err
		}
		store := filepath.Join(c.dataDir, "nats")
		clientFile := filepath.Join(store, "client.url")
		s.embedded, err = bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: store, Listen: c.natsListen, ClientFile: clientFile})
		if errors.Is(err, bus.ErrStoreInUse) && c.existing {
			// A running regressd holds the store: a command that only uses
			// it (dlq, replay) uses that server's bus. A role is refused: it
			// would lose its bus when the other process stops.
			url, rerr := bus.ReadClientURL(clientFile, 10*time.Second)
			if rerr != nil {
				return err
			}
			s.nc, err = bus.Connect(url, name)
		} else if err == nil {
			s.nc, err = s.embedded.Connect(name)
		}
	} else {
		s.nc, err = bus.Connect(c.natsURL, name)
	}
	if err != nil {
		return err
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := bus.Ensure(ectx, s.js, bus.Config{Replicas: c.replicas}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			return fmt.Errorf("%w (is JetStream enabled on %s? start nats-server with -js)", err, bus.Redact(c.natsURL))
		}
		return err
	}
	return nil
}

// openDatabase connects to --database-url, or starts (or attaches to) the
// private cluster under --data-dir, and runs the migrations.
func (m *Main) openDatabase(ctx context.Context, c *commonFlags, s *stack) error {
	url := c.databaseURL
	if url == "" {
		if err := c.checkExisting("postgres", "--database-url"); err != nil {
			return err
		}
		if err := c.checkDataDir(); err != nil {
			return err
		}
		cl, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(c.dataDir, "postgres"), Logger: s.log})
		if err != nil {
			return err
		}
		s.cluster = cl
		url = cl.URL()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	cfg.ConnConfig.RuntimeParams["application_name"] = "regressd"
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return fmt.Errorf("cannot reach PostgreSQL at %s: %w (is it running? check --database-url)", redactURL(url), err)
	}
	s.pool = pool
	if err := schemas.Migrate(ctx, pool); err != nil {
		return err
	}
	return nil
}

// redactURL hides a password in a connection string for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if at := strings.LastIndex(u, "@"); at > i {
			cred := u[i+3 : at]
			if user, _, ok := strings.Cut(cred, ":"); ok {
				return u[:i+3] + user + ":***" + u[at:]
			}
		}
	}
	return u
}

// isLoopback reports whether addr listens only on the loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
