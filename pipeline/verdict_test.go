package pipeline_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

// publishVerdict sends the result a producer sends for a task that ends before the
// model: no batches, a status and a message.
func publishVerdict(e *pipelinetest.Env, trigger, taskID string, status schemas.Status, msg string) {
	e.T.Helper()
	meta, _ := json.Marshal(schemas.TaskMeta{TaskID: taskID, Trigger: trigger, Measurement: trigger, Target: "y",
		Model: pipelinetest.DefaultModel(), Features: []string{"x1", "x2"}, Start: pipelinetest.T0, End: pipelinetest.T0.Add(100 * time.Hour),
		RequestTimeout: schemas.Duration(time.Minute)})
	e.PublishRaw(schemas.SubjectResults+trigger, map[string]string{schemas.HeaderSchema: schemas.Version,
		schemas.HeaderTask: string(meta), schemas.HeaderBatch: "-1", schemas.HeaderStatus: string(status),
		schemas.HeaderMessage: msg, "Regressd-Code": "200"}, nil)
}

// A job planned twice at once (its first delivery still at work when the
// server gave it out again) may end once in batches and once in a verdict:
// the batches are the truth, whichever comes first.
func TestVerdictNeverOverridesBatches(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "vb", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.Args("vb", "predict_batch_size=5"))

	// Batches first, then a late verdict: the task stays a success.
	_, out := e.Engine("vb", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	if pipelinetest.Result(t, out)["status"] != "success" {
		t.Fatalf("run: %v", out)
	}
	id := out["task_id"].(string)
	publishVerdict(e, "vb", id, schemas.StatusSkipped, "no rows to predict")
	pipelinetest.WaitUntil(t, 15*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_task_batches WHERE task_id = $1 AND batch_no = -1`, id) == 1
	}, "the late verdict recorded")
	if n := e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = $1 AND status = 'success' AND message = ''`, id); n != 1 {
		t.Fatal("a late verdict overrode a task with batches")
	}
	st, body := e.Do(http.MethodGet, "/api/v3/engine/vb/tasks/"+id, nil, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"status": "success"`) {
		t.Fatalf("task summary after the late verdict: HTTP %d %s", st, body)
	}

	// A verdict first, then the batches of the same task: it reopens and
	// ends as its batches say.
	e.MakeTable(pipelinetest.SeriesSpec{Table: "vr", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	const id2 = "t_verdict_then_batches"
	publishVerdict(e, "vr", id2, schemas.StatusFailed, "the job was dead-lettered")
	pipelinetest.WaitUntil(t, 15*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = $1 AND status = 'failed'`, id2) == 1
	}, "the verdict settled the task")
	job, _ := json.Marshal(schemas.Job{Schema: schemas.Version, TaskID: id2, Trigger: "vr",
		Args: pipelinetest.MustArgs(t, pipelinetest.Args("vr", "predict_batch_size=5")), Start: pipelinetest.T0, End: pipelinetest.T0.Add(100 * time.Hour), Origin: "webhook"})
	e.PublishRaw(schemas.SubjectJobs+"vr", map[string]string{schemas.HeaderSchema: schemas.Version, schemas.HeaderTask: id2}, job)
	pipelinetest.WaitUntil(t, 30*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = $1 AND status = 'success' AND batches = 4 AND message = ''`, id2) == 1
	}, "the task reopened by its batches and succeeded")
	if n := e.Count(`SELECT count(*) FROM vr_regressed`); n != 20 {
		t.Fatalf("rows=%d, want 20", n)
	}
}
