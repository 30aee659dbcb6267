package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// serve listens on addr and serves h until ctx ends, then shuts down
// gracefully; it returns the base URL it listens at.
func (p *Pipeline) serve(ctx context.Context, h http.Handler, addr, what string, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s listener on %s: %w (is another regressd running? pick another address)", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
// which replace a built-in one of the same pattern.
func (p *Pipeline) routes(mux *http.ServeMux, extra map[string]http.Handler) {
	builtin := map[string]http.HandlerFunc{
		"GET /livez":   func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") },
		"GET /readyz":  p.ready,
		"GET /metrics": p.metrics.Handler().ServeHTTP,
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
