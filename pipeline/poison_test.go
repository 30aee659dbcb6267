package pipeline_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// The audit's poison job: a NUL byte in a tag value (PostgreSQL 22021) was
// retried 20 times over ~14 minutes while the webhook hung, then
// dead-lettered with the task never final. The engine endpoint now refuses
// it at once; a job that carries it anyway (published before, or by another
// client of the bus) fails its task at once with a final status and a
// clear message, and is never dead-lettered.
func TestPoisonTagValueFailsAtOnce(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "pz", Start: pipelinetest.T0, Rows: 100, GapEach: 5, Tags: map[string]string{"host": "a"}},
		pipelinetest.Args("pz", ""))
	body := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))
	body["tags"] = "host:a%00b"
	began := time.Now()
	st, out := e.Engine("pz", body)
	if msg, _ := out["message"].(string); st != http.StatusBadRequest || !strings.Contains(msg, "NUL") {
		t.Fatalf("NUL in a tag value at the endpoint: HTTP %d %v, want 400 naming the NUL", st, out)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("refused after %v", took)
	}

	ctx := context.Background()
	pub, err := scheduler.NewPublisher(ctx, e.P.JS, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := pipelinetest.MustArgs(t, pipelinetest.Args("pz", ""))
	args.Tags = map[string]string{"host": "a\x00b"}
	id, _, err := pub.Publish(ctx, schemas.Job{Trigger: "pz", Args: args, Start: pipelinetest.T0, End: pipelinetest.T0.Add(100 * time.Hour),
		Origin: "webhook", Requested: time.Now().UTC()}, "poison")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sum, err := pub.Wait(wctx, id)
	if err != nil {
		t.Fatalf("the poison task is not final after 30 s: %v", err)
	}
	if sum.Status != schemas.StatusFailed || !strings.Contains(sum.Message, "22021") || !strings.Contains(sum.Message, "retrying cannot help") {
		t.Fatalf("poison task: %s %q, want failed naming SQLSTATE 22021", sum.Status, sum.Message)
	}
	if dl := e.DeadLetters(""); len(dl) != 0 {
		t.Fatalf("the poison job was dead-lettered: %+v", dl)
	}
}
