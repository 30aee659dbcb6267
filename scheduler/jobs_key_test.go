package scheduler

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// The audit's replay: a bogus key asking for the window a valid key's run
// covers got that run's answer back. A window under another key is another
// run; under the same key, the same run. Each job's sealed key opens for
// its own task only, so a seal lifted from one job's message into another
// task does not open.
func TestAnotherKeyIsAnotherRun(t *testing.T) {
	srv := bustest.New(t)
	ctx := context.Background()
	pub, err := NewPublisher(ctx, srv.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := schemas.NewSealer([]byte("0123456789abcdef-secret"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	publish := func(key string) (string, bool) {
		t.Helper()
		job := schemas.Job{Trigger: "m", Args: schemas.RunArgs{Measurement: "m", Field: "y", Model: "v/m"},
			Start: start, End: start.Add(time.Hour), Origin: "webhook", KeyID: sealer.KeyID(key),
			Seal: func(taskID string) (string, error) { return sealer.Seal(key, taskID, time.Hour) }}
		id, dup, err := pub.Publish(ctx, job, "")
		if err != nil {
			t.Fatal(err)
		}
		return id, dup
	}
	valid, _ := publish("valid-key")
	bogus, dup := publish("bogus-key")
	if dup || bogus == valid {
		t.Fatalf("another key's request joined the valid key's run %s (dup %v)", bogus, dup)
	}
	if again, dup := publish("valid-key"); !dup || again != valid {
		t.Fatalf("the same key asked again: %s (dup %v), want the run %s", again, dup, valid)
	}
	stream, err := srv.JS.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]schemas.Job{}
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var j schemas.Job
		if err := json.Unmarshal(m.Data, &j); err != nil {
			t.Fatal(err)
		}
		jobs[j.TaskID] = j
	}
	if key, err := sealer.Open(jobs[valid].SealedKey, valid); err != nil || key != "valid-key" {
		t.Fatalf("the valid job's key: %q %v", key, err)
	}
	if _, err := sealer.Open(jobs[valid].SealedKey, bogus); err == nil {
		t.Fatal("the valid job's sealed key opened in another task")
	}
	for _, j := range jobs {
		var raw map[string]any
		b, _ := json.Marshal(j)
		json.Unmarshal(b, &raw)
		if _, ok := raw["KeyID"]; ok {
			t.Fatal("the key id travels on the bus")
		}
	}
}
