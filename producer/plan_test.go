package producer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

type publishedBatch struct {
	no    int
	meta  schemas.TaskMeta
	times []int64
	// pack is the number of series of the pack that carried it; 0 for a
	// lone batch.
	pack int
}

// queryTimes are the times of an encoded QuerySchema record.
func queryTimes(t *testing.T, body []byte, features []string) []int64 {
	t.Helper()
	rec, err := schemas.DecodeRecord(body, schemas.QuerySchema(features))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var out []int64
	for i := 0; i < int(rec.NumRows()); i++ {
		out = append(out, int64(rec.Column(0).(*array.Timestamp).Value(i)))
	}
	return out
}

// batches reads every batch in REGRESS_BATCHES.
func batches(t *testing.T, s *bustest.Server) []publishedBatch {
	t.Helper()
	ctx := context.Background()
	str, err := s.JS.Stream(ctx, schemas.StreamBatches)
	if err != nil {
		t.Fatal(err)
	}
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []publishedBatch
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := str.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if schemas.IsPack(raw.Header) {
			// A pack: each series to predict is its task's batch 0.
			pack, err := schemas.DecodePack(raw.Header, raw.Data)
			if err != nil {
				t.Fatal(err)
			}
			times, lo := queryTimes(t, pack.Queries, pack.Series[0].Meta.Features), 0
			for _, e := range pack.Series {
				if _, n := e.PackRows(); n > 0 {
					out = append(out, publishedBatch{meta: e.Meta, times: times[lo : lo+n], pack: len(pack.Series)})
					lo += n
				}
			}
			if lo != len(times) {
				t.Fatalf("pack of %d query rows holds %d", lo, len(times))
			}
			continue
		}
		var b publishedBatch
		json.Unmarshal([]byte(raw.Header.Get(schemas.HeaderTask)), &b.meta)
		json.Unmarshal([]byte(raw.Header.Get(schemas.HeaderBatch)), &b.no)
		b.times = queryTimes(t, raw.Data, b.meta.Features)
		out = append(out, b)
	}
	return out
}

// A job delivered again (the producer died before acking it) must publish
// exactly the batches of its first plan, even after the writer stored the
// predictions of the first batch: a fresh plan would skip those rows, cut the
// rest differently under the same message ids, and lose them to the dedupe.
func TestRedeliveredJobPublishesItsFirstPlan(t *testing.T) {
	ctx := context.Background()
	s := bustest.New(t)
	pool := pgtest.New(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `CREATE TABLE m ("time" timestamptz, x double precision, y double precision)`); err != nil {
		t.Fatal(err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"m"}, []string{"time", "x", "y"}, pgx.CopyFromSlice(200, func(i int) ([]any, error) {
		var y any = math.Sin(float64(i))
		if i%5 == 0 {
			y = nil // 40 rows to predict
		}
		return []any{t0.Add(time.Duration(i) * time.Hour), float64(i), y}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(ctx, s.JS, tsdb.New(pool), Config{})
	if err != nil {
		t.Fatal(err)
	}
	job := schemas.Job{Schema: schemas.Version, TaskID: "t_replan", Trigger: "m", Start: t0, End: t0.Add(200 * time.Hour),
		Args: schemas.RunArgs{Measurement: "m", Field: "y", FeatureFields: []string{"x"}, Model: "regressd/model-small",
			Window: schemas.Duration(30 * 24 * time.Hour), MinHistory: 10, MaxTrainRows: 1000, SkipExisting: true,
			PredictBatchSize: 10, RequestTimeout: schemas.Duration(time.Minute), MaxPredictRows: 5000, MaxReadRows: 50000, MaxRetries: 3}}
	if err := p.Plan(ctx, job); err != nil {
		t.Fatal(err)
	}
	first := batches(t, s)
	if len(first) != 4 {
		t.Fatalf("first plan published %d batches, want 4", len(first))
	}

	// The writer stored batch 0's predictions; the producer's ack was lost.
	series := tsdb.Series{Measurement: "m", Target: "y", Model: "regressd/model-small"}
	var points []tsdb.Point
	for _, us := range first[0].times {
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
	// Forget the first publishes (as if they had never happened, or the
	// dedupe window had passed) so that what the redelivery publishes shows.
	if err := s.JS.DeleteStream(ctx, schemas.StreamBatches); err != nil {
		t.Fatal(err)
	}
	if err := bus.Ensure(ctx, s.JS, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Plan(ctx, job); err != nil {
		t.Fatal(err)
	}
	again := batches(t, s)
	if len(again) != len(first) {
		t.Fatalf("the redelivered job published %d batches, want the first plan's %d", len(again), len(first))
	}
	for i := range first {
		a, b := first[i], again[i]
		if a.no != b.no || b.meta.Batches != 4 || len(a.times) != len(b.times) || a.meta.ContextDigest != b.meta.ContextDigest {
			t.Fatalf("batch %d differs: first %d rows of %d batches, again %d rows of %d", i, len(a.times), a.meta.Batches, len(b.times), b.meta.Batches)
		}
		for j := range a.times {
			if a.times[j] != b.times[j] {
				t.Fatalf("batch %d row %d differs", i, j)
			}
		}
	}

	// The table lost a feature under the planned task: delivered again,
	// the job ends in a verdict, as planning would, not in retries.
	if _, err := pool.Exec(ctx, `ALTER TABLE m DROP COLUMN x`); err != nil {
		t.Fatal(err)
	}
	if err := p.Plan(ctx, job); err != nil {
		t.Fatalf("redelivery on a changed table: %v, want a verdict", err)
	}
	str, err := s.JS.Stream(ctx, schemas.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := str.GetLastMsgForSubject(ctx, schemas.SubjectResults+"m")
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get(schemas.HeaderBatch) != "-1" || schemas.Status(raw.Header.Get(schemas.HeaderStatus)) != schemas.StatusFailed {
		t.Fatalf("result batch %q status %q, want the verdict (-1, failed)", raw.Header.Get(schemas.HeaderBatch), raw.Header.Get(schemas.HeaderStatus))
	}
}
