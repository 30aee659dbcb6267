package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// ops/METRICS.md, which the alerts, the dashboard and the autoscaler under
// ops/ are checked against, lists exactly the metrics a process with every
// watcher serves.
func TestMetricsMatchOpsList(t *testing.T) {
	raw, err := os.ReadFile("../ops/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(regressd_[a-z_]+)` \\|").FindAllStringSubmatch(string(raw), -1) {
		listed = append(listed, m[1])
	}

	srv := bustest.New(t)
	if _, err := srv.JS.CreateOrUpdateConsumer(context.Background(), "REGRESS_BATCHES",
		jetstream.ConsumerConfig{Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	m := New()
	for _, err := range []error{
		m.WatchBreaker(func() string { return "closed" }),
		m.WatchJetStream(srv.JS, JetStreamConfig{Consumers: []Consumer{{"REGRESS_BATCHES", "worker"}}, Streams: []string{"REGRESS_DLQ"}}),
		m.WatchNATS(srv.NC),
		m.WatchDBPool(pgtest.New(t)),
		m.WatchGatewayRefusals(func() map[string]int64 { return map[string]int64{"busy": 1} }),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	m.SetSchedule("hourly", time.Hour, time.Now())
	m.ObserveRung("no_cache")
	// Requests are counted by status code, so that series exists once one is answered.
	m.InstrumentHandler(ServerAPI, http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "regressd_") {
			served = append(served, mf.GetName())
		}
	}
	slices.Sort(listed)
	slices.Sort(served)
	for _, n := range served {
		if _, ok := slices.BinarySearch(listed, n); !ok {
			t.Errorf("%s is served but not listed in ops/METRICS.md", n)
		}
	}
	for _, n := range listed {
		if _, ok := slices.BinarySearch(served, n); !ok {
			t.Errorf("%s is listed in ops/METRICS.md but not served", n)
		}
	}
	if len(listed) < 30 {
		t.Errorf("only %d metrics listed; the table was not read", len(listed))
	}
}
