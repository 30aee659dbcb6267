package writer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// runningWriter is a writer consuming results on a real JetStream and a
// private database until the test ends.
func runningWriter(t *testing.T) (jetstream.JetStream, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t)
	js := bustest.New(t).JS
	w, err := New(context.Background(), js, pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return js, pool
}

// seriesMeta is series s of run parent (sites a, b, …): one batch of
// three rows.
func seriesMeta(parent, site string, t0 time.Time) schemas.TaskMeta {
	return schemas.TaskMeta{TaskID: parent + "-s" + site, Parent: parent, Trigger: "fleet", Measurement: "fleet", Target: "y",
		Model: "regressd/model-2l", TagColumns: []string{"site"}, Series: map[string]string{"site": site},
		Start: t0, End: t0.Add(time.Hour), Batches: 1, QueryRows: 3, ContextRows: 30}
}

// okSeries is a series' batch 0, predicted: three rows.
func okSeries(m schemas.TaskMeta) schemas.Result {
	return schemas.Result{Meta: m, Batch: 0, Status: schemas.StatusOK, Rows: 3}
}

// resultPack is a pack result of rs, each StatusOK one predicting its rows
// one minute apart from its window's start.
func resultPack(t *testing.T, parent string, rs []schemas.Result) *nats.Msg {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ResultSchema)
	defer b.Release()
	for _, r := range rs {
		if r.Status != schemas.StatusOK {
			continue
		}
		for i := range r.Rows {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Meta.Start.Add(time.Duration(i) * time.Minute).UnixMicro()))
			b.Field(1).(*array.Float64Builder).Append(float64(i))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	body, err := schemas.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	m, err := schemas.NewResultPackMsg("fleet", parent, rs, body)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func publish(t *testing.T, js jetstream.JetStream, m *nats.Msg, id string) {
	t.Helper()
	if _, err := js.PublishMsg(context.Background(), m, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
}

func announce(t *testing.T, js jetstream.JetStream, parent string, total int, t0 time.Time) {
	t.Helper()
	m, err := schemas.NewResultMsg(schemas.Result{Meta: schemas.TaskMeta{TaskID: parent, Trigger: "fleet", Measurement: "fleet",
		Target: "y", Model: "regressd/model-2l", Start: t0, End: t0.Add(time.Hour), SeriesTotal: total},
		Batch: schemas.VerdictBatch, Status: schemas.StatusSeries})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, m, parent+":series")
}

// drained waits until the writer acknowledged every result.
func drained(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := js.Consumer(context.Background(), schemas.StreamResults, "writer")
		if err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("results not all acknowledged after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitFor(t *testing.T, pool *pgxpool.Pool, what, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ok bool
		if err := pool.QueryRow(context.Background(), sql, args...).Scan(&ok); err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 20s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A pack's series are written in one go, each as a task of its own: a's
// points, b's failure, c's verdict; the run settles partial once all three
// are counted. The same pack delivered again writes and counts nothing.
func TestPackWritesEverySeriesOnce(t *testing.T) {
	ctx := context.Background()
	js, pool := runningWriter(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	announce(t, js, "t_run", 3, t0)
	a, b, c := seriesMeta("t_run", "a", t0), seriesMeta("t_run", "b", t0), seriesMeta("t_run", "c", t0)
	c.Batches = 0
	rs := []schemas.Result{okSeries(a),
		{Meta: b, Batch: 0, Status: schemas.StatusFailed, Rows: 3, Message: "injected", Code: 400},
		{Meta: c, Batch: schemas.VerdictBatch, Status: schemas.StatusSkipped, Message: "fewer than min_history"}}
	publish(t, js, resultPack(t, "t_run", rs), "pack-1")
	waitFor(t, pool, "settled run", `SELECT status <> 'running' FROM regressd_tasks WHERE task_id = 't_run'`)
	check := func(when string) {
		t.Helper()
		var status, msg string
		var written, ended int
		if err := pool.QueryRow(ctx, `SELECT status, message, written, series_ended FROM regressd_tasks WHERE task_id = 't_run'`).
			Scan(&status, &msg, &written, &ended); err != nil {
			t.Fatal(err)
		}
		if status != "partial" || written != 3 || ended != 3 || msg != "3 series: 1 succeeded, 1 skipped, 1 failed; first failure (site:b): injected" {
			t.Errorf("%s: run %s %q, %d written, %d series ended; want partial, 3 written, 3 ended", when, status, msg, written, ended)
		}
		var rows int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM fleet_regressed WHERE site = 'a'`).Scan(&rows); err != nil || rows != 3 {
			t.Errorf("%s: %d rows of site a (%v), want 3", when, rows, err)
		}
		for task, want := range map[string]string{a.TaskID: "success", b.TaskID: "failed", c.TaskID: "skipped"} {
			var got string
			if err := pool.QueryRow(ctx, `SELECT status FROM regressd_tasks WHERE task_id = $1 AND series_counted`, task).Scan(&got); err != nil || got != want {
				t.Errorf("%s: series %s %q (%v), want %s and counted", when, task, got, err, want)
			}
		}
	}
	check("first delivery")
	// Delivered again under another id (past the stream's deduplication).
	publish(t, js, resultPack(t, "t_run", rs), "pack-1-again")
	drained(t, js)
	check("redelivery")
}

// A run's verdict that comes while its series still run (its job was
// dead-lettered after it published them) does not settle it: the run
// settles when its last series has, and its message keeps the verdict.
func TestVerdictWaitsForTheRunsSeries(t *testing.T) {
	ctx := context.Background()
	js, pool := runningWriter(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	announce(t, js, "t_run", 2, t0)
	a, b := seriesMeta("t_run", "a", t0), seriesMeta("t_run", "b", t0)
	publish(t, js, resultPack(t, "t_run", []schemas.Result{okSeries(a)}), "pack-a")
	waitFor(t, pool, "series a counted", `SELECT series_ended = 1 FROM regressd_tasks WHERE task_id = 't_run'`)
	v, err := schemas.NewResultMsg(schemas.Result{Meta: schemas.TaskMeta{TaskID: "t_run", Trigger: "fleet", Measurement: "fleet", Start: t0, End: t0.Add(time.Hour)},
		Batch: schemas.VerdictBatch, Status: schemas.StatusFailed, Message: "the job was dead-lettered", Code: 500})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, v, "t_run:verdict:dead-letter")
	waitFor(t, pool, "the verdict recorded", `SELECT message LIKE '%dead-lettered%' FROM regressd_tasks WHERE task_id = 't_run'`)
	var status string
	if err := pool.QueryRow(ctx, `SELECT status FROM regressd_tasks WHERE task_id = 't_run'`).Scan(&status); err != nil || status != "running" {
		t.Fatalf("run %q (%v) after its verdict with series b running, want running", status, err)
	}
	publish(t, js, resultPack(t, "t_run", []schemas.Result{okSeries(b)}), "pack-b")
	waitFor(t, pool, "settled run", `SELECT status <> 'running' FROM regressd_tasks WHERE task_id = 't_run'`)
	var msg string
	var written int
	if err := pool.QueryRow(ctx, `SELECT status, message, written FROM regressd_tasks WHERE task_id = 't_run'`).Scan(&status, &msg, &written); err != nil {
		t.Fatal(err)
	}
	if status != "success" || written != 6 || msg != "2 series: 2 succeeded, 0 skipped, 0 failed; the job was dead-lettered" {
		t.Errorf("run %s %q with %d written, want success, both series and the verdict said, 6 written", status, msg, written)
	}
}

// A running run reports what its ended series wrote (the ledger row the
// status page, 'task show' and the engine's task endpoint read), whether a
// series ended before the run was announced or after, and a series
// delivered again is not counted twice.
func TestRunningRunShowsSeriesProgress(t *testing.T) {
	ctx := context.Background()
	js, pool := runningWriter(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := seriesMeta("t_run", "a", t0), seriesMeta("t_run", "b", t0)
	// a ends before the announcement, b after it; c still runs.
	publish(t, js, resultPack(t, "t_run", []schemas.Result{okSeries(a)}), "pack-a")
	waitFor(t, pool, "series a", `SELECT series_counted FROM regressd_tasks WHERE task_id = $1`, a.TaskID)
	announce(t, js, "t_run", 3, t0)
	waitFor(t, pool, "the announcement", `SELECT series_total = 3 FROM regressd_tasks WHERE task_id = 't_run'`)
	progress := func(when string, want int) {
		t.Helper()
		var status string
		var written, queries, ended int
		if err := pool.QueryRow(ctx, `SELECT status, written, query_rows, series_ended FROM regressd_tasks WHERE task_id = 't_run'`).
			Scan(&status, &written, &queries, &ended); err != nil {
			t.Fatal(err)
		}
		if status != "running" || written != 3*want || queries != 3*want || ended != want {
			t.Errorf("%s: run %s, %d written of %d query rows, %d series ended; want running, %d of %d, %d",
				when, status, written, queries, ended, 3*want, 3*want, want)
		}
	}
	progress("series a ended before the announcement", 1)
	publish(t, js, resultPack(t, "t_run", []schemas.Result{okSeries(b)}), "pack-b")
	waitFor(t, pool, "series b", `SELECT series_ended = 2 FROM regressd_tasks WHERE task_id = 't_run'`)
	progress("series b ended after it", 2)
	publish(t, js, resultPack(t, "t_run", []schemas.Result{okSeries(b)}), "pack-b-again")
	drained(t, js)
	progress("series b delivered again", 2)
}
