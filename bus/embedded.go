package bus

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Embedded is a NATS server with JetStream running in this process.
type Embedded struct {
	srv    *server.Server
	listen bool
}

// EmbeddedConfig configures StartEmbedded.
type EmbeddedConfig struct {
	// StoreDir is where JetStream keeps its streams. Required.
	StoreDir string
	// Listen is "host:port" to accept network clients; "" listens on no port
	// (clients connect in-process); "127.0.0.1:0" picks a free port.
	Listen string
	// Name is the server name; defaults to "regressd".
	Name string
}

// StartEmbedded starts a JetStream server in-process and waits until it is ready.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats: no store dir")
	}
	if err := os.MkdirAll(cfg.StoreDir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: 8 << 20,
	}
	if opts.ServerName == "" {
		opts.ServerName = "regressd"
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen address %q: %w", cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 30s (is %s writable and not used by another regressd?)", cfg.StoreDir)
	}
	return &Embedded{srv: srv, listen: cfg.Listen != ""}, nil
}

// ClientURL is the URL network clients use; "" when the server listens on no port.
func (e *Embedded) ClientURL() string {
	if !e.listen {
		return ""
	}
	return e.srv.ClientURL()
}

// Connect opens a client connection, in-process when the server has no port.
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	opts := clientOptions(name)
	if !e.listen {
		opts = append(opts, nats.InProcessServer(e.srv))
		return nats.Connect("", opts...)
	}
	return nats.Connect(e.srv.ClientURL(), opts...)
}

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// Connect dials an external NATS server.
func Connect(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, clientOptions(name)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w (is the server running? check --nats-url)", url, err)
	}
	return nc, nil
}

func clientOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}
}
