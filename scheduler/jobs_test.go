package scheduler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// The same window asked for again: while its run is under way, or within
// the duplicate window after it ended, it is that run; once the run ended
// longer ago, it is a new run with its own task id (new gaps get filled),
// and asked for again, that new run answers, then the next.
func TestRepeatedWindowIsANewRunOnceTheLastEnded(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	pub, err := NewPublisher(ctx, srv.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := srv.JS.KeyValue(ctx, schemas.BucketTasks)
	if err != nil {
		t.Fatal(err)
	}
	end := func(id string, ago time.Duration) {
		t.Helper()
		b, _ := json.Marshal(schemas.TaskSummary{TaskID: id, Status: schemas.StatusSuccess, Updated: time.Now().Add(-ago)})
		if _, err := kv.Put(ctx, id, b); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	job := schemas.Job{Trigger: "m", Args: schemas.RunArgs{Measurement: "m", Field: "y", Model: "v/m"},
		Start: start, End: start.Add(time.Hour), Origin: "webhook"}
	publish := func() (string, bool) {
		t.Helper()
		id, dup, err := pub.Publish(ctx, job, "")
		if err != nil {
			t.Fatal(err)
		}
		return id, dup
	}
	first, dup := publish()
	if again, dup2 := publish(); dup || !dup2 || again != first {
		t.Fatalf("a run under way asked again: %s (dup %v), then %s (dup %v); want the same run", first, dup, again, dup2)
	}
	end(first, time.Second)
	if again, dup := publish(); !dup || again != first {
		t.Fatalf("asked again just after the run ended: %s (dup %v), want %s", again, dup, first)
	}
	end(first, time.Hour)
	second, dup := publish()
	if dup || second == first {
		t.Fatalf("asked again an hour after the run ended: %s (dup %v), want a new run", second, dup)
	}
	if again, dup := publish(); !dup || again != second {
		t.Fatalf("the new run asked for twice: %s (dup %v), want %s once", again, dup, second)
	}
	// The new run under way is the window's run, however long it takes;
	// once it ended, a third run follows it.
	if again, dup := publish(); !dup || again != second {
		t.Fatalf("the second run under way: %s (dup %v), want %s", again, dup, second)
	}
	end(second, time.Hour)
	if third, dup := publish(); dup || third == first || third == second {
		t.Fatalf("a third run: %s (dup %v) after %s and %s", third, dup, first, second)
	}
	info, err := srv.JS.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != 3 {
		t.Fatalf("%d jobs published, want 3 (one per run)", n)
	}
}

// A queued task whose summary expired from the task bucket before the
// writer had any row of it (a model slow past the bucket's TTL) is still
// known, as running, to the publisher that queued it.
func TestQueuedTaskOutlivesTheBucketTTL(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	pub, err := NewPublisher(ctx, srv.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id, _, err := pub.Publish(ctx, schemas.Job{Trigger: "m", Args: schemas.RunArgs{Measurement: "m", Field: "y", Model: "v/m"},
		Start: start, End: start.Add(time.Hour)}, "")
	if err != nil {
		t.Fatal(err)
	}
	kv, _ := srv.JS.KeyValue(ctx, schemas.BucketTasks)
	if err := kv.Purge(ctx, id); err != nil { // what the TTL does
		t.Fatal(err)
	}
	if sum, ok, err := pub.Task(ctx, id); err != nil || !ok || sum.Status != schemas.StatusRunning {
		t.Fatalf("after the bucket forgot it: %+v ok=%v err=%v, want running", sum, ok, err)
	}
	if _, ok, _ := pub.Task(ctx, "t_never"); ok {
		t.Fatal("a task never queued is known")
	}
}
