package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/regressd/regressd/httpauth"
	"github.com/regressd/regressd/httpjson"
)

// serverLimits bound what one client can hold of an HTTP server.
type serverLimits struct {
	// MaxConns caps the open connections (see connLimiter).
	MaxConns int
	// MaxBody refuses a request whose Content-Length is larger with 413,
	// before reading any of it; 0 leaves the check to the handler.
	MaxBody int64
	// WriteTimeout bounds a request's handling and answer: above the
	// longest a handler may wait (an engine call waits for its task).
	WriteTimeout time.Duration
	// LoopbackNames, on a server listening on a loopback address, refuses
	// a request whose Host, or Origin when sent, is not a loopback name:
	// a page on another site whose name was rebound to 127.0.0.1 (DNS
	// rebinding), or posting from its own origin, gets 403.
	LoopbackNames bool
	// ReadTimeout and IdleTimeout replace readTimeout and idleTimeout
	// when set (tests).
	ReadTimeout, IdleTimeout time.Duration
}

// The HTTP servers' timeouts: a request's headers within
// readHeaderTimeout, the whole request within readTimeout, and an idle
// keep-alive connection closed after idleTimeout.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 60 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 64 << 10
	// defaultMaxConns is each server's connection cap: far under the
	// process's file descriptors (Go raises the soft limit to the hard
	// one, commonly 20,000 and more).
	defaultMaxConns = 1024
	// gatewayWriteTimeout bounds a /predict call: its queue wait and its
	// computation.
	gatewayWriteTimeout = 10 * time.Minute
)

// newServer is an HTTP server for h with lim's bounds, and its listener
// wrapped in the connection cap.
func newServer(ln net.Listener, h http.Handler, lim serverLimits) (*http.Server, *connLimiter) {
	cl := newConnLimiter(ln, cmp.Or(lim.MaxConns, defaultMaxConns))
	if lim.MaxBody > 0 {
		h = refuseLargeBodies(h, lim.MaxBody)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() && lim.LoopbackNames {
		h = loopbackNamesOnly(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: min(readHeaderTimeout, cmp.Or(lim.ReadTimeout, readTimeout)),
		ReadTimeout: cmp.Or(lim.ReadTimeout, readTimeout), WriteTimeout: lim.WriteTimeout, IdleTimeout: cmp.Or(lim.IdleTimeout, idleTimeout), MaxHeaderBytes: maxHeaderBytes, ConnState: cl.state}
	return srv, cl
}

// refuseLargeBodies answers 413 to a request whose Content-Length is over
// max before reading any of its body, and closes the connection: a client
// claiming a gigabyte and sending a few bytes gets its answer at once.
func refuseLargeBodies(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprintf(w, `{"status":"failed","message":"request body of %d bytes is over this server's limit of %d bytes"}`+"\n", r.ContentLength, max)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackNamesOnly refuses, with 403, a request whose Host is not a
// loopback name, or whose Origin (when sent) is not a loopback origin.
func loopbackNamesOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what, bad := "", ""
		if !loopbackName(r.Host) {
			what, bad = "Host", r.Host
		} else if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !loopbackName(u.Host) {
				what, bad = "Origin", o
			}
		}
		if what != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			msg, _ := json.Marshal(map[string]string{"status": "failed", "message": fmt.Sprintf(
				"%s %q is not a loopback name: this server listens on a loopback address and answers localhost, 127.0.0.1 and [::1] only (to serve other names, listen on another address with REGRESSD_AUTH_TOKENS set)",
				what, httpjson.Truncate(bad, 100))})
			w.Write(append(msg, '\n'))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackName says whether host[:port] names this machine only:
// localhost, a name under .localhost, or a loopback IP.
func loopbackName(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve listens on addr and serves h until ctx ends, then shuts down
// gracefully; it returns the base URL it listens at.
func (p *Pipeline) serve(ctx context.Context, h http.Handler, addr, what string, lim serverLimits, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s listener on %s: %w (is another regressd running? pick another address)", what, addr, err)
	}
	srv, cl := newServer(ln, h, lim)
	ln = cl
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(what+" server", "err", err)
		}
	}()
	go func() {
		defer p.wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	return "http://" + ln.Addr().String(), nil
}

// routes mounts /livez, /readyz and /metrics, then the extra handlers,
// which replace a built-in one of the same pattern. With tokens set,
// /metrics (trigger names, rates) asks for one like the API does; the
// probes, which answer "ok" or "ready" and nothing else, stay open for
// the kubelet and load balancers.
func (p *Pipeline) routes(mux *http.ServeMux, extra map[string]http.Handler, tokens []string) {
	metrics := p.metrics.Handler()
	builtin := map[string]http.HandlerFunc{
		"GET /livez":  func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") },
		"GET /readyz": p.ready,
		"GET /metrics": func(w http.ResponseWriter, r *http.Request) {
			if !httpauth.Allowed(tokens, r) {
				httpjson.Write(w, http.StatusUnauthorized, map[string]string{"status": "failed", "message": httpauth.Message}, "")
				return
			}
			metrics.ServeHTTP(w, r)
		},
	}
	for pattern, h := range builtin {
		if _, replaced := extra[pattern]; !replaced {
			mux.Handle(pattern, h)
		}
	}
	for pattern, h := range extra {
		mux.Handle(pattern, h)
	}
}

func (p *Pipeline) ready(w http.ResponseWriter, r *http.Request) {
	if p.NC != nil && !p.NC.IsConnected() {
		http.Error(w, "nats not connected", http.StatusServiceUnavailable)
		return
	}
	if p.Pool != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := p.Pool.Ping(ctx); err != nil {
			http.Error(w, "database not reachable", http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintln(w, "ready")
}
