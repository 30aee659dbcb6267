// Package bustest gives tests a real JetStream: an embedded server on a
// random loopback port with its store in the test's temp dir, and the
// streams regressd uses.
package bustest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus"
)

// Server is a running test server with one client connection.
type Server struct {
	*bus.Embedded
	NC  *nats.Conn
	JS  jetstream.JetStream
	Dir string
}

// New starts a server for t, stopped when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	e, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := e.Connect("test")
	if err != nil {
		e.Shutdown()
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Ensure(context.Background(), js, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		e.Shutdown()
	})
	return &Server{Embedded: e, NC: nc, JS: js, Dir: dir}
}

// Run runs f (a role's Run) in a goroutine until ctx or the test ends,
// then cancels it and waits for it to return.
func Run(t testing.TB, ctx context.Context, f func(context.Context) error) {
	t.Helper()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(rctx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
}
