package tsdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regressd/regressd/tsdb/pgtest"
)

func TestRuns(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	// Ledger rows as the writer leaves them: three runs of two triggers,
	// one partial with a failed batch.
	for i, r := range []struct {
		id, trigger, status string
		failed              int
	}{{"t_1", "a", "success", 0}, {"t_2", "b", "skipped", 0}, {"t_3", "a", "partial", 1}} {
		if _, err := pool.Exec(ctx, `INSERT INTO regressd_tasks (task_id, trigger_name, measurement, target, model,
			window_start, window_end, origin, status, batches, batches_done, batches_failed, written, remaining, skipped_existing, created)
			VALUES ($1, $2, 'm', 'y', 'v/model-1', $3, $4, 'webhook', $5, 2, 2 - $6, $6, 7, $6 * 3, 4, $4)`,
			r.id, r.trigger, t0, t0.Add(time.Duration(i+1)*time.Hour), r.status, r.failed); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO regressd_task_batches (task_id, batch_no, status, rows, written, message, code)
		VALUES ('t_3', 1, 'failed', 3, 0, 'gateway said no', 400), ('t_3', 0, 'ok', 7, 7, '', 0)`); err != nil {
		t.Fatal(err)
	}
	db := New(pool)
	all, err := db.Runs(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].TaskID != "t_3" || all[2].TaskID != "t_1" {
		t.Fatalf("runs %+v, want newest first", all)
	}
	if r := all[0]; r.FirstFailure != "gateway said no" || r.Written != 7 || r.Remaining != 3 || r.SkippedExisting != 4 ||
		r.Origin != "webhook" || !r.End.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("run read as %+v", r)
	}
	if a, _ := db.Runs(ctx, "a", 1); len(a) != 1 || a[0].TaskID != "t_3" {
		t.Fatalf("newest run of a: %+v", a)
	}
	last, err := db.LastRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 2 || last["a"].TaskID != "t_3" || last["b"].TaskID != "t_2" {
		t.Fatalf("last runs %+v", last)
	}
	r, batches, err := db.Run(ctx, "t_3")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "partial" || len(batches) != 2 || batches[0].Batch != 0 || batches[1].Message != "gateway said no" || batches[1].Code != 400 {
		t.Fatalf("run %+v batches %+v", r, batches)
	}
	if _, _, err := db.Run(ctx, "t_nope"); !errors.Is(err, ErrNoRun) {
		t.Fatalf("unknown run: %v", err)
	}
}
