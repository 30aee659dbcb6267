package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Stores says where a deployment keeps its bus and its database.
type Stores struct {
	// DataDir holds the embedded NATS store, the private PostgreSQL
	// cluster and the generated deployment secret. Default ./regressd-data.
	DataDir string
	// DatabaseURL is an external PostgreSQL; empty starts (or attaches
	// to) the private cluster under DataDir.
	DatabaseURL string
	// NATSURL is an external NATS, comma-separated URLs; empty starts the
	// embedded JetStream server under DataDir.
	NATSURL string
	// NATSListen is host:port for the embedded server to accept clients
	// on; empty listens on no port.
	NATSListen string
	// Replicas of every stream: 1 on one machine, 3 in a cluster. Default 1.
	Replicas int
	// Existing is for commands that only use a running deployment's
	// stores (keys, dlq, replay): they refuse a DataDir that holds none,
	// and reach the bus of the regressd that holds the embedded store.
	Existing bool
}

// Stack is an open bus and database, with the embedded servers behind
// them when no URLs were given.
type Stack struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Pool     *pgxpool.Pool
	Embedded *bus.Embedded
	Cluster  *pgcluster.Cluster
	log      *slog.Logger
}

// Open opens what a command needs: the bus (named name on the server), the
// database (migrated), or both. On error nothing stays open.
func Open(ctx context.Context, s Stores, name string, needBus, needDB bool, log *slog.Logger) (*Stack, error) {
	if s.DataDir == "" {
		s.DataDir = "./regressd-data"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &Stack{log: log}
	var err error
	if needBus {
		err = s.openBus(ctx, st, name)
	}
	if err == nil && needDB {
		err = s.openDatabase(ctx, st)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// Close closes what Open opened, in reverse order.
func (st *Stack) Close() {
	if st.Pool != nil {
		st.Pool.Close()
	}
	if st.NC != nil {
		st.NC.Drain()
		st.NC.Close()
	}
	if st.Embedded != nil {
		st.Embedded.Shutdown()
	}
	if st.Cluster != nil {
		if err := st.Cluster.Stop(); err != nil {
			st.log.Warn("stop private postgres", "err", err)
		}
	}
}

// checkExisting refuses a data dir that holds no sub (postgres or nats)
// when only an existing store may be used: creating one there would leave
// the running server's store untouched and the user misled. alt names the
// flag that reaches the store without a data dir.
func (s Stores) checkExisting(sub, alt string) error {
	if !s.Existing {
		return nil
	}
	if fi, err := os.Stat(s.DataDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("no regressd data dir at %s: pass --data-dir (or REGRESSD_DATA_DIR) of the running server, or %s", s.DataDir, alt)
	}
	if fi, err := os.Stat(filepath.Join(s.DataDir, sub)); err != nil || !fi.IsDir() {
		return fmt.Errorf("the regressd data dir %s holds no %s store: pass --data-dir (or REGRESSD_DATA_DIR) of the running server, or %s", s.DataDir, sub, alt)
	}
	return nil
}

// CheckExisting refuses a data dir that holds no private PostgreSQL, for a
// command that only reads a running deployment's database.
func (s Stores) CheckExisting() error {
	s.Existing = true
	return s.checkExisting("postgres", "--database-url")
}

// DatabaseURLOfRunning is the database URL of a running deployment:
// DatabaseURL when set, else the URL of the private cluster under DataDir,
// which must be running.
func (s Stores) DatabaseURLOfRunning(ctx context.Context) (string, error) {
	if s.DatabaseURL != "" {
		return s.DatabaseURL, nil
	}
	if err := s.CheckExisting(); err != nil {
		return "", err
	}
	cl, err := pgcluster.Attach(ctx, pgcluster.Options{Dir: filepath.Join(s.DataDir, "postgres")})
	if errors.Is(err, pgcluster.ErrNotRunning) {
		return "", fmt.Errorf("no regressd is running on the data dir %s: start 'regressd run --data-dir %s' first", s.DataDir, s.DataDir)
	}
	if err != nil {
		return "", err
	}
	return cl.URL(), nil
}

// checkDataDir makes sure the data dir can be written, with a fix in the error.
func (s Stores) checkDataDir() error {
	if err := os.MkdirAll(s.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir %s: %w (choose a writable --data-dir)", s.DataDir, err)
	}
	probe := filepath.Join(s.DataDir, ".write-test")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		return fmt.Errorf("data dir %s is not writable: %w (choose a writable --data-dir)", s.DataDir, err)
	}
	return os.Remove(probe)
}

// openBus connects to NATS (or starts the embedded server) and ensures the
// streams.
func (s Stores) openBus(ctx context.Context, st *Stack, name string) error {
	var err error
	if s.NATSURL == "" {
		if err := s.checkExisting("nats", "--nats-url"); err != nil {
			return err
		}
		if err := s.checkDataDir(); err != nil {
			return err
		}
		store := filepath.Join(s.DataDir, "nats")
		clientFile := filepath.Join(store, "client.url")
		token, terr := s.natsToken()
		if terr != nil {
			return terr
		}
		st.Embedded, err = bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: store, Listen: s.NATSListen, ClientFile: clientFile, Token: token})
		if errors.Is(err, bus.ErrStoreInUse) && s.Existing {
			// A running regressd holds the store: a command that only uses
			// it (dlq, replay) uses that server's bus. A role is refused: it
			// would lose its bus when the other process stops.
			url, rerr := bus.ReadClientURL(clientFile, 10*time.Second)
			if rerr != nil {
				return err
			}
			st.NC, err = bus.Connect(url, name)
		} else if err == nil {
			st.NC, err = st.Embedded.Connect(name)
		}
	} else {
		st.NC, err = bus.Connect(s.NATSURL, name)
	}
	if err != nil {
		return err
	}
	if st.JS, err = jetstream.New(st.NC); err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := bus.Ensure(ectx, st.JS, bus.Config{Replicas: s.Replicas}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			return fmt.Errorf("%w (is JetStream enabled on %s? start nats-server with -js)", err, bus.Redact(s.NATSURL))
		}
		return err
	}
	return nil
}

// openDatabase connects to DatabaseURL, or starts (or attaches to) the
// private cluster under DataDir, and runs the migrations.
func (s Stores) openDatabase(ctx context.Context, st *Stack) error {
	url := s.DatabaseURL
	if url == "" {
		if err := s.checkExisting("postgres", "--database-url"); err != nil {
			return err
		}
		if err := s.checkDataDir(); err != nil {
			return err
		}
		cl, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(s.DataDir, "postgres"), Logger: st.log})
		if err != nil {
			return err
		}
		st.Cluster = cl
		url = cl.URL()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	// The session keeps the database's TimeZone (or the URL's ?timezone=):
	// a source whose time column is timestamp without time zone means its
	// wall-clock times in that zone, as psql would read them, and the read
	// casts them to instants with it. Forcing UTC here moved such a table's
	// predictions by the zone's offset. Every other time is an instant
	// (timestamptz), whatever the session's zone.
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
	st.Pool = pool
	return schemas.Migrate(ctx, pool)
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
