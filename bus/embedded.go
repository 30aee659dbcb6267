package bus

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Embedded is a NATS server with JetStream running in this process.
type Embedded struct {
	srv        *server.Server
	listen     bool
	lock       *os.File // held while the server runs: one process per store
	token      string   // required of network clients (ClientFile's loopback port, or Listen)
	clientFile string
}

// ErrStoreInUse: another process (a running regressd) serves the store dir.
var ErrStoreInUse = errors.New("the store is in use by another regressd")

// lockStore takes the store dir's lock, without waiting. Two JetStream
// servers on one store would each think it theirs: messages one writes the
// other never sees, and consumers stall.
func lockStore(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "regressd.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("embedded nats: %s: %w (a running 'regressd run' with this --data-dir?): stop it first, or reach its bus with --nats-url after starting it with --nats-listen 127.0.0.1:4222", dir, ErrStoreInUse)
		}
		return nil, fmt.Errorf("embedded nats: lock %s: %w", dir, err)
	}
	return f, nil
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
	// ClientFile, when set, is where the server writes the URL other
	// processes reach it at (regressd's own commands, while this one holds
	// the store), readable by this user only. With no Listen the server
	// then listens on a loopback port and requires a token, which the URL
	// carries. The file is removed at Shutdown.
	ClientFile string
	// Token is required of every network client when set. A Listen on
	// other than a loopback address is refused without one: anyone who
	// reaches the port could otherwise read and forge jobs and triggers.
	Token string
}

// ErrListenNeedsToken: a listener reachable from other hosts was asked for
// with no credentials.
var ErrListenNeedsToken = errors.New("a NATS listener on a non-loopback address requires a token")

// IsLoopback says whether host (of a host:port) is reachable from this
// machine only: "localhost" or a loopback IP. "" and 0.0.0.0 listen on
// every interface and are not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadClientURL reads the URL a running embedded server left in file (see
// EmbeddedConfig.ClientFile). A server still starting has not written it
// yet: it waits up to wait for the file.
func ReadClientURL(file string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(file)
		if url := strings.TrimSpace(string(b)); err == nil && url != "" {
			return url, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("embedded nats: no server URL in %s: %w", file, ErrStoreInUse)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeFileAtomic writes data to a temporary file beside name and renames
// it there, so a reader sees the whole file or none.
func writeFileAtomic(name string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
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
	var token string
	switch {
	case cfg.Listen == "" && cfg.ClientFile != "":
		b := make([]byte, 24)
		rand.Read(b)
		token = hex.EncodeToString(b)
		opts.Host, opts.Port, opts.Authorization = "127.0.0.1", server.RANDOM_PORT, token
	case cfg.Listen == "":
		opts.DontListen = true
	default:
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
		if cfg.Token == "" && !IsLoopback(host) {
			return nil, fmt.Errorf("embedded nats: listen on %s: %w", cfg.Listen, ErrListenNeedsToken)
		}
		opts.Host, opts.Port = host, p
		token = cfg.Token
		opts.Authorization = token
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	if cfg.ClientFile != "" {
		os.Remove(cfg.ClientFile) // a crashed server's, until ours is ready
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		lock.Close()
		return nil, fmt.Errorf("embedded nats: not ready after 30s (is %s writable?)", cfg.StoreDir)
	}
	e := &Embedded{srv: srv, listen: cfg.Listen != "", lock: lock, token: token, clientFile: cfg.ClientFile}
	if cfg.ClientFile != "" {
		url := srv.ClientURL()
		if token != "" {
			url = strings.Replace(url, "nats://", "nats://"+token+"@", 1)
		}
		if err := writeFileAtomic(cfg.ClientFile, []byte(url+"\n"), 0o600); err != nil {
			e.Shutdown()
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
	}
	return e, nil
}

// ClientURL is the URL network clients use; "" when the server listens on no port.
func (e *Embedded) ClientURL() string {
	if !e.listen {
		return ""
	}
	return e.srv.ClientURL()
}

// Connect opens a client connection, in-process unless the server was asked
// to listen (Listen) for clients of its own.
func (e *Embedded) Connect(name string) (*nats.Conn, error) {
	opts := clientOptions(name)
	if !e.listen {
		opts = append(opts, nats.InProcessServer(e.srv))
		if e.token != "" {
			opts = append(opts, nats.Token(e.token))
		}
		return nats.Connect("", opts...)
	}
	if e.token != "" {
		opts = append(opts, nats.Token(e.token))
	}
	return nats.Connect(e.srv.ClientURL(), opts...)
}

// Shutdown stops the server and waits for it to finish.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
	if e.clientFile != "" {
		os.Remove(e.clientFile)
	}
	e.lock.Close() // releases the store's lock
}

// Connect dials an external NATS server.
func Connect(url, name string) (*nats.Conn, error) {
	nc, err := nats.Connect(url, clientOptions(name)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w (is the server running? check --nats-url)", Redact(url), err)
	}
	return nc, nil
}

// Redact drops the credentials of each of the comma-separated NATS URLs:
// whatever stands before the last '@', parsed or not.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		start := 0
		if k := strings.Index(p, "://"); k >= 0 {
			start = k + 3
		}
		// A NATS URL has no path, so any '@' closes its credentials.
		if at := strings.LastIndex(p, "@"); at >= start {
			p = p[:start] + "REDACTED" + p[at:]
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

func clientOptions(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}
}
