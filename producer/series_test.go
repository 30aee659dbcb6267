package producer

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// A group_by job delivered again publishes every series' first plan, even
// after series a's first batch was written; so does a first delivery that
// follows a planned one (a job retried from the dead-letter queue).
func TestRedeliveredGroupByJobPublishesItsFirstPlans(t *testing.T) {
	ctx := context.Background()
	s := bustest.New(t)
	pool := pgtest.New(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `CREATE TABLE g ("time" timestamptz, s text, x double precision, y double precision)`); err != nil {
		t.Fatal(err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"g"}, []string{"time", "s", "x", "y"}, pgx.CopyFromSlice(200, func(k int) ([]any, error) {
		i := k % 100
		var y any = math.Sin(float64(i))
		if i%5 == 0 {
			y = nil // 20 rows to predict per series
		}
		return []any{t0.Add(time.Duration(i) * time.Hour), []string{"a", "b"}[k/100], float64(i), y}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, s.JS, tsdb.New(pool), Config{})
	if err != nil {
		t.Fatal(err)
	}
	job := schemas.Job{Schema: schemas.Version, TaskID: "t_group", Trigger: "g", Start: t0, End: t0.Add(100 * time.Hour),
		Args: schemas.RunArgs{Measurement: "g", Field: "y", FeatureFields: []string{"x"}, Model: "regressd/model-small",
			Window: schemas.Duration(30 * 24 * time.Hour), MinHistory: 10, MaxTrainRows: 1000, SkipExisting: true,
			PredictBatchSize: 10, RequestTimeout: schemas.Duration(time.Minute), MaxPredictRows: 5000, MaxReadRows: 50000,
			MaxRetries: 3, GroupBy: []string{"s"}, MaxRunPredictRows: 1000}}
	packed := map[string]bool{}
	plans := func() map[string][]int64 {
		out := map[string][]int64{}
		clear(packed)
		for _, b := range batches(t, s) {
			k := fmt.Sprintf("%s/%d", b.meta.Series["s"], b.no)
			out[k], packed[k] = b.times, b.pack > 0
		}
		return out
	}
	forget := func() {
		if err := s.JS.DeleteStream(ctx, schemas.StreamBatches); err != nil {
			t.Fatal(err)
		}
		if err := bus.Ensure(ctx, s.JS, bus.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	first := context.WithValue(ctx, firstDeliveryKey{}, true)
	if err := p.Plan(first, job); err != nil {
		t.Fatal(err)
	}
	want := plans()
	if len(want) != 4 || len(want["a/0"]) != 10 || len(want["b/1"]) != 10 {
		t.Fatalf("first plan: %d batches %v, want 2 of 10 rows per series", len(want), want)
	}
	// The writer stored series a's batch 0; the producer's ack was lost.
	series := tsdb.Series{Measurement: "g", Target: "y", Model: "regressd/model-small", TagColumns: []string{"s"}, Tags: map[string]string{"s": "a"}}
	var points []tsdb.Point
	for _, us := range want["a/0"] {
		points = append(points, tsdb.Point{Time: arrow.Timestamp(us).ToTime(arrow.Microsecond), Value: 1})
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tsdb.EnsureRegressed(ctx, tx, series); err != nil {
			return err
		}
		_, err := tsdb.WritePredictions(ctx, tx, series, points)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"delivered again", ctx}, {"retried as a first delivery", first}} {
		forget()
		if err := p.Plan(c.ctx, job); err != nil {
			t.Fatal(err)
		}
		got := plans()
		if len(got) != len(want) {
			t.Fatalf("%s: %d batches, want the first plan's %d", c.name, len(got), len(want))
		}
		for k, ts := range want {
			if fmt.Sprint(got[k]) != fmt.Sprint(ts) {
				t.Errorf("%s: batch %s has rows %v, want %v", c.name, k, got[k], ts)
			}
		}
	}
	// A fresh task over the same window skips a's 10 written rows.
	forget()
	job.TaskID = "t_group2"
	if err := p.Plan(first, job); err != nil {
		t.Fatal(err)
	}
	got := plans()
	// a's 10 rows left fit in one batch: it travels in a pack; b does not.
	if !packed["a/0"] || packed["b/0"] {
		t.Errorf("fresh plan: packed %v, want a packed and b alone", packed)
	}
	if len(got) != 3 || len(got["a/0"]) != 10 || got["a/1"] != nil {
		keys := []string{}
		for k := range got {
			keys = append(keys, k)
		}
		t.Errorf("fresh plan: batches %s, want a/0 (10 rows), b/0, b/1", strings.Join(keys, " "))
	}
}
