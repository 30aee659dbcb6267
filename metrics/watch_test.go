package metrics

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sony/gobreaker/v2"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The consumer gauges follow a real JetStream consumer as messages are
// published, fetched and acknowledged.
func TestJetStreamConsumerInfo(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, "REGRESS_JOBS", jetstream.ConsumerConfig{
		Durable: "producer", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "regress.jobs.>"})
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	if err := m.WatchJetStream(srv.JS, JetStreamConfig{
		Consumers: []Consumer{{"REGRESS_JOBS", "producer"}, {"REGRESS_BATCHES", "not_created_yet"}},
		Streams:   []string{"REGRESS_JOBS", "REGRESS_DLQ"},
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := srv.JS.Publish(ctx, "regress.jobs.weather", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	jobs := map[string]string{"stream": "REGRESS_JOBS", "consumer": "producer"}
	check := func(pending, acks, msgs float64) {
		t.Helper()
		if got := mustSample(t, m, NameConsumerPending, jobs); got != pending {
			t.Errorf("pending = %v, want %v", got, pending)
		}
		if got := mustSample(t, m, NameConsumerAcks, jobs); got != acks {
			t.Errorf("ack pending = %v, want %v", got, acks)
		}
		if got := mustSample(t, m, NameStreamMessages, map[string]string{"stream": "REGRESS_JOBS"}); got != msgs {
			t.Errorf("stream messages = %v, want %v", got, msgs)
		}
	}
	check(3, 0, 3)
	batch, err := cons.FetchNoWait(2)
	if err != nil {
		t.Fatal(err)
	}
	var got []jetstream.Msg
	for msg := range batch.Messages() {
		got = append(got, msg)
	}
	if len(got) != 2 {
		t.Fatalf("fetched %d, want 2", len(got))
	}
	check(1, 2, 3)
	if err := got[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	check(1, 1, 3)
	if got := mustSample(t, m, NameStreamMessages, map[string]string{"stream": "REGRESS_DLQ"}); got != 0 {
		t.Errorf("DLQ messages = %v, want 0", got)
	}
	if _, ok := sample(t, m, NameConsumerPending, map[string]string{"consumer": "not_created_yet"}); ok {
		t.Error("a consumer that does not exist is served")
	}
	if got := mustSample(t, m, NameJetStreamErrors, nil); got != 0 {
		t.Errorf("info errors = %v for a consumer not created yet, want 0", got)
	}
	// With the server gone the scrape still answers, and counts the failures.
	srv.NC.Close()
	if _, ok := sample(t, m, NameConsumerPending, jobs); ok {
		t.Error("pending served with no connection")
	}
	// The first scrape failed at two consumers and two streams; the
	// second, which reads the counter while its own collectors run
	// concurrently, may have counted none, some or all of its own.
	if got := mustSample(t, m, NameJetStreamErrors, nil); got < 4 || got > 8 {
		t.Errorf("info errors = %v after a scrape with no connection, want 4 to 8", got)
	}
	if err := m.WatchJetStream(srv.JS, JetStreamConfig{}); err == nil {
		t.Error("a second WatchJetStream registered")
	}
}

func TestNATSAndPoolWatchers(t *testing.T) {
	srv := bustest.New(t)
	pool := pgtest.New(t)
	m := New()
	if err := m.WatchNATS(srv.NC); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchDBPool(pool); err != nil {
		t.Fatal(err)
	}
	if err := srv.NC.Publish("x.y", make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	srv.NC.Flush()
	if got := mustSample(t, m, NameNATSOutBytes, nil); got < 1000 {
		t.Errorf("nats out bytes = %v, want ≥ 1000", got)
	}
	if got := mustSample(t, m, NameNATSConnected, nil); got != 1 {
		t.Errorf("nats connected = %v, want 1", got)
	}
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := mustSample(t, m, NameDBAcquiredConns, nil); got != 1 {
		t.Errorf("acquired conns = %v, want 1", got)
	}
	conn.Release()
	if got := mustSample(t, m, NameDBConns, nil); got < 1 {
		t.Errorf("db conns = %v, want ≥ 1", got)
	}
	srv.NC.Close()
	if got := mustSample(t, m, NameNATSConnected, nil); got != 0 {
		t.Errorf("nats connected = %v after close, want 0", got)
	}
	if err := m.WatchNATS(srv.NC); err == nil {
		t.Error("a second WatchNATS registered")
	}
}

// The breaker gauge follows gobreaker's own state, read at each scrape.
func TestBreakerState(t *testing.T) {
	cb := gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		Timeout:     20 * time.Millisecond,
	})
	m := New()
	if err := m.WatchBreaker(func() string { return cb.State().String() }); err != nil {
		t.Fatal(err)
	}
	want := func(state string) {
		t.Helper()
		for _, s := range []string{"closed", "half_open", "open"} {
			v := 0.0
			if s == state {
				v = 1
			}
			if got := mustSample(t, m, NameBreakerState, map[string]string{"state": s}); got != v {
				t.Errorf("breaker_state{%s} = %v, want %v", s, got, v)
			}
		}
	}
	want("closed")
	cb.Execute(func() (any, error) { return nil, errors.New("down") })
	want("open")
	time.Sleep(50 * time.Millisecond)
	want("half_open")
}

func TestRungsMatchEngine(t *testing.T) {
	engine := []string{gpu.RungNoCache, gpu.RungResidentBF16, gpu.RungResidentInt8, gpu.RungOffloadBF16,
		gpu.RungOffloadInt8, gpu.RungStreamBF16, gpu.RungStreamInt8, gpu.RungContextRowChunk, gpu.RungPlainLoop}
	if got := rungs(); len(got) != len(engine) {
		t.Fatalf("rungs %v, engine's %v", got, engine)
	}
	for i, r := range engine {
		if rungs()[i] != r {
			t.Errorf("rung %d is %q, the engine's %q", i, rungs()[i], r)
		}
	}
}
