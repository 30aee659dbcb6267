package writer

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
	"github.com/regressd/regressd/tsdb"
	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func okResult(task, measurement string, batch, batches int, t0 time.Time) result {
	r := result{Result: schemas.Result{Meta: schemas.TaskMeta{TaskID: task, Trigger: measurement, Measurement: measurement, Target: "y",
		Model: "regressd/model-2l", Batches: batches, Start: t0, End: t0.Add(time.Hour)},
		Batch: batch, Status: schemas.StatusOK, Rows: 3}}
	for i := range 3 {
		r.points = append(r.points, tsdb.Point{Time: t0.Add(time.Duration(10*batch+i) * time.Minute), Value: float64(i)})
	}
	return r
}

// newTestWriter is a writer on a real JetStream and a private database.
func newTestWriter(t *testing.T) (*Writer, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t)
	w, err := New(context.Background(), bustest.New(t).JS, pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return w, pool
}

// A group is one transaction; when it fails, its results are written one by
// one, so the bad one fails alone and the others land.
func TestGroupCommitIsolatesABadResult(t *testing.T) {
	ctx := context.Background()
	w, pool := newTestWriter(t)
	// bad_regressed exists with a check no prediction passes: its shape is
	// fine (tsdb.CheckRegressed lets it through), its COPY fails, and with it
	// the group's transaction.
	if _, err := pool.Exec(ctx, `CREATE TABLE bad_regressed ("time" timestamptz NOT NULL, value double precision NOT NULL CHECK (value < -1e300),
		model text NOT NULL, source text NOT NULL, target text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	group := []*pending{
		{r: okResult("t_b", "good", 1, 2, t0)},
		{r: okResult("t_bad", "bad", 0, 1, t0)},
		{r: okResult("t_b", "good", 0, 2, t0)},
		{r: okResult("t_a", "good", 0, 1, t0.Add(time.Hour))},
	}
	out := w.applyGroup(ctx, group)
	for i, p := range group {
		if out[i].err != nil {
			t.Errorf("%s batch %d: err %v", p.r.Meta.TaskID, p.r.Batch, out[i].err)
		}
		// The table refuses t_bad's values for good: its batch fails (409)
		// rather than waits on retries that cannot succeed.
		if p.r.Meta.TaskID == "t_bad" && out[i].status != schemas.StatusFailed {
			t.Errorf("t_bad: status %q, want failed", out[i].status)
		}
	}
	if sum, ok, err := Summary(ctx, pool, "t_bad"); err != nil || !ok || sum.Code != 409 || !strings.Contains(sum.Message, "refused the predictions") {
		t.Errorf("t_bad summary %+v (%v %v)", sum, ok, err)
	}
	var rows, done int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM good_regressed`).Scan(&rows); err != nil || rows != 9 {
		t.Fatalf("good_regressed holds %d rows (%v), want 9", rows, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM regressd_tasks WHERE status = 'success'`).Scan(&done); err != nil || done != 2 {
		t.Fatalf("%d tasks succeeded (%v), want t_a and t_b", done, err)
	}
	// The group sorted itself: t_b's batches in order, and the statuses
	// follow it (written one by one: running after batch 0, success after
	// batch 1).
	for i, want := range []struct {
		task   string
		batch  int
		status schemas.Status
	}{{"t_a", 0, "success"}, {"t_b", 0, "running"}, {"t_b", 1, "success"}} {
		if p := group[i]; p.r.Meta.TaskID != want.task || p.r.Batch != want.batch || out[i].status != want.status {
			t.Errorf("group[%d] = %s/%d %q, want %s/%d %q", i, p.r.Meta.TaskID, p.r.Batch, out[i].status, want.task, want.batch, want.status)
		}
	}

	// A group that commits whole writes each table in one COPY; a task's
	// last result carries its status, the earlier ones leave the summary
	// to it, and a task still running says so on every result.
	t1 := t0.Add(2 * time.Hour)
	whole := []*pending{
		{r: okResult("t_c", "good", 1, 2, t1)},
		{r: okResult("t_d", "good", 0, 3, t1.Add(time.Hour))},
		{r: okResult("t_c", "good", 0, 2, t1)},
		{r: okResult("t_d", "good", 2, 3, t1.Add(time.Hour))},
	}
	for i, o := range w.applyGroup(ctx, whole) {
		want := map[string]schemas.Status{"t_c/0": statusCovered, "t_c/1": "success", "t_d/0": "running", "t_d/2": "running"}
		got := fmt.Sprintf("%s/%d", whole[i].r.Meta.TaskID, whole[i].r.Batch)
		if o.err != nil || o.status != want[got] {
			t.Errorf("%s: %+v, want status %q", got, o, want[got])
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM good_regressed`).Scan(&rows); err != nil || rows != 21 {
		t.Fatalf("good_regressed holds %d rows (%v), want 21", rows, err)
	}
	var written, batchesDone int
	if err := pool.QueryRow(ctx, `SELECT written, batches_done FROM regressd_tasks WHERE task_id = 't_d'`).Scan(&written, &batchesDone); err != nil || written != 6 || batchesDone != 2 {
		t.Fatalf("t_d: written %d, batches done %d (%v), want 6 and 2", written, batchesDone, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM regressd_task_batches WHERE task_id = 't_d' AND written = 3`).Scan(&batchesDone); err != nil || batchesDone != 2 {
		t.Fatalf("t_d: %d batches record 3 rows written (%v), want 2", batchesDone, err)
	}

	// The same results again (redelivered): nothing is written twice.
	again := w.applyGroup(ctx, []*pending{{r: okResult("t_a", "good", 0, 1, t0.Add(time.Hour))}, {r: okResult("t_b", "good", 1, 2, t0)}})
	for _, o := range again {
		if o.err != nil || o.status != "" {
			t.Errorf("redelivery: %+v, want no error and no status", o)
		}
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM good_regressed`).Scan(&rows); err != nil || rows != 21 {
		t.Fatalf("after redelivery good_regressed holds %d rows, want 21", rows)
	}
}

// A result for an output table that cannot hold predictions (made after the
// producer checked) is recorded as a failed batch at once: the task ends.
func TestIncompatibleTableFailsTheBatch(t *testing.T) {
	ctx := context.Background()
	w, pool := newTestWriter(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE clash_regressed (x int)`); err != nil {
		t.Fatal(err)
	}
	o := w.apply(ctx, okResult("t_clash", "clash", 0, 1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if o.err != nil || o.status != schemas.StatusFailed {
		t.Fatalf("outcome %+v, want the task failed without an error", o)
	}
	var msg string
	if err := pool.QueryRow(ctx, `SELECT message FROM regressd_task_batches WHERE task_id = 't_clash' AND status = 'failed'`).Scan(&msg); err != nil || !strings.Contains(msg, `no column "source"`) {
		t.Fatalf("failed batch message %q (%v)", msg, err)
	}
	// Its caller hears 409, as from the producer's own check.
	if sum, ok, err := Summary(ctx, pool, "t_clash"); err != nil || !ok || sum.Code != 409 {
		t.Fatalf("summary %+v (%v %v), want code 409", sum, ok, err)
	}
}

// A summary too large for the task bucket is told by its error, not its
// text: the writer then drops a dry run's predictions and tries again.
func TestOversizedSummaryIsToldByItsError(t *testing.T) {
	ctx := context.Background()
	srv := bustest.New(t)
	kv, err := srv.JS.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Create(ctx, "t_big", make([]byte, 1_100_000))
	if err == nil || !tooLarge(err) {
		t.Fatalf("oversized put: %v, want an error tooLarge tells", err)
	}
	if _, err := kv.Create(ctx, "t_small", []byte("{}")); err != nil || tooLarge(err) {
		t.Fatalf("small put: %v", err)
	}
}
