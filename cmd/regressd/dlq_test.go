package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/nats-io/nats.go"

	"github.com/regressd/regressd/bus"
	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

// dlqCLI runs `regressd dlq` against e's NATS and returns its output.
func dlqCLI(e *pipelinetest.Env, args ...string) (string, error) {
	e.T.Helper()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	args = append([]string{"dlq", "--nats-url", e.P.Embedded.ClientURL(), "--log-level", "error"}, args...)
	err := m.Run(context.Background(), args)
	return out.String(), err
}

func waitDLQ(e *pipelinetest.Env, n int, within time.Duration) []bus.DeadLetterEntry {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for {
		got := e.DeadLetters(schemas.SubjectDLQ + ">")
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("%d dead letters after %v, want %d: %+v", len(got), within, n, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPoisonMessagesReachDLQ puts garbage on every stream next to a real run:
// each poison message ends in the DLQ with a reason, a poison message that
// names a task settles that task as failed, and the real run is unaffected.
func TestPoisonMessagesReachDLQ(t *testing.T) {
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "pz", Start: pipelinetest.T0, Rows: 200, GapEach: 10}, pipelinetest.Args("pz", "predict_batch_size=5"))

	v := map[string]string{schemas.HeaderSchema: schemas.Version}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for k, x := range v {
			h[k] = x
		}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	meta := func(id string) string {
		b, _ := json.Marshal(schemas.TaskMeta{TaskID: id, Trigger: "pz", Measurement: "pz", Target: "y",
			Model: pipelinetest.DefaultModel(), Features: []string{"x1", "x2"}, Batches: 1, Start: pipelinetest.T0, End: pipelinetest.T0.Add(time.Hour),
			RequestTimeout: schemas.Duration(time.Minute)})
		return string(b)
	}
	poison := []struct {
		subject string
		hdr     map[string]string
		data    string
		reason  string
	}{
		{"regress.jobs.pz", with(schemas.HeaderTask, "t_garbage"), "{not json", "undecodable job"},
		{"regress.jobs.pz", map[string]string{}, `{"schema":"1"}`, `schema version ""`},
		{"regress.jobs.pz", with(), `{"schema":"0","task_id":"t_old"}`, `job schema "0"`},
		{"regress.jobs.pz", with(), `{"schema":"99","task_id":"t_poison_job","trigger":"pz","args":{"measurement":"pz","field":"y","feature_fields":["x1","x2"],"model":"` +
			pipelinetest.DefaultModel() + `"},"start":"2026-01-01T00:00:00Z","end":"2026-01-01T01:00:00Z","origin":"webhook"}`, `job schema "99"`},
		{"regress.batches.pz", with(), "x", "batch without a readable task header"},
		{"regress.batches.pz", with(schemas.HeaderTask, meta("t_poison_batch"), schemas.HeaderBatch, "7"), "x", `batch number "7" out of range`},
		{"regress.batches.pz", with(schemas.HeaderTask, meta("t_poison_batch"), schemas.HeaderBatch, "0"), "ARROW1garbage", "decode arrow"},
		{"regress.results.pz", with(schemas.HeaderTask, meta("t_poison_result"), schemas.HeaderBatch, "0", schemas.HeaderStatus, "weird"), "", `result status "weird" unknown`},
		{"regress.results.pz", with(schemas.HeaderTask, meta("t_poison_result"), schemas.HeaderBatch, "0", schemas.HeaderStatus, "ok"), "garbage", "decode arrow"},
	}
	done := make(chan map[string]any, 1)
	go func() {
		_, out := e.Engine("pz", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(200*time.Hour)))
		done <- out
	}()
	for _, p := range poison {
		e.PublishRaw(p.subject, p.hdr, []byte(p.data))
	}
	out := <-done
	if r := pipelinetest.Result(t, out); r["status"] != "success" || pipelinetest.Num(r["written"]) != 20 {
		t.Fatalf("the real run next to the poison: %v", out)
	}
	got := waitDLQ(e, len(poison), 30*time.Second)
	for _, p := range poison {
		found := false
		for _, d := range got {
			_, subj, _ := strings.Cut(strings.SplitN(d.Origin, ":", 2)[1], ":")
			if subj == p.subject && strings.Contains(d.Reason, p.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("no dead letter from %s with reason %q in %+v", p.subject, p.reason, got)
		}
	}
	// Poison that names a task settles it: its waiters get an answer.
	for _, id := range []string{"t_poison_job", "t_poison_batch", "t_poison_result"} {
		pipelinetest.WaitUntil(t, 15*time.Second, func() bool {
			return e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = $1 AND status = 'failed'`, id) == 1
		}, id+" settled as failed")
	}
	if n := e.Count(`SELECT count(*) FROM pz_regressed`); n != 20 {
		t.Fatalf("rows=%d, want 20", n)
	}

	// The CLI sees the same.
	text, err := dlqCLI(e, "list")
	if err != nil || !strings.Contains(text, strconv.Itoa(len(poison))+" message(s)") || !strings.Contains(text, "undecodable job") {
		t.Fatalf("dlq list: %v\n%s", err, text)
	}
	text, err = dlqCLI(e, "list", "--stream", "batches", "--json")
	var entries []bus.DeadLetterEntry
	if err != nil || json.Unmarshal([]byte(text), &entries) != nil || len(entries) != 3 {
		t.Fatalf("dlq list --stream batches --json: %v\n%s", err, text)
	}
	text, err = dlqCLI(e, "show", strconv.FormatUint(entries[2].Seq, 10))
	if err != nil || !strings.Contains(text, "reason:       ") || !strings.Contains(text, "decode arrow") || !strings.Contains(text, "t_poison_batch") {
		t.Fatalf("dlq show: %v\n%s", err, text)
	}
	if _, err := dlqCLI(e, "show", "99999"); err == nil || !strings.Contains(err.Error(), "no dead letter 99999") {
		t.Fatalf("show of a missing seq: %v", err)
	}
	if _, err := dlqCLI(e, "retry"); err == nil || !strings.Contains(err.Error(), "needs sequence numbers or --all") {
		t.Fatalf("retry without targets: %v", err)
	}
	text, err = dlqCLI(e, "purge", "--stream", "batches", "--all")
	if err != nil || !strings.Contains(text, "3 message(s) purged") {
		t.Fatalf("purge --stream batches --all: %v\n%s", err, text)
	}
	if n := len(e.DeadLetters(schemas.SubjectDLQ + ">")); n != len(poison)-3 {
		t.Fatalf("%d dead letters after purging the batches, want %d", n, len(poison)-3)
	}
	text, err = dlqCLI(e, "purge", "--all", "--older-than", "1h")
	if err != nil || !strings.Contains(text, "0 message(s) purged") {
		t.Fatalf("purge --older-than 1h: %v\n%s", err, text)
	}
}

// TestDLQRetryRepairs retries two dead letters that can succeed now: a job,
// which runs, and the result of a batch that had failed for good, which the
// writer accepts in place of the failure, completing its task.
func TestDLQRetryRepairs(t *testing.T) {
	vendor, _ := pipelinetest.FakeVendor(t, func(n int64) int {
		if n == 2 {
			return http.StatusBadRequest // the second batch fails for good
		}
		return 0
	})
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", vendor.URL, "--concurrency", "1")
	e.Table(pipelinetest.SeriesSpec{Table: "rp", Start: pipelinetest.T0, Rows: 100, GapEach: 5}, pipelinetest.ArgsModel("rp", "vendor/model-x", "predict_batch_size=10"))
	st, out := e.Engine("rp", pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour)))
	if r := pipelinetest.Result(t, out); st != http.StatusOK || r["status"] != "partial" || pipelinetest.Num(r["remaining"]) != 10 {
		t.Fatalf("HTTP %d %v, want partial", st, out)
	}
	taskID := out["task_id"].(string)

	// The failed batch's rows, predicted after all: its result as the writer
	// would have dead-lettered it.
	ctx := context.Background()
	rows, err := e.Pool.Query(ctx, `SELECT s."time" FROM rp s LEFT JOIN rp_regressed r ON r."time" = s."time" WHERE s.y IS NULL AND r."time" IS NULL ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	for rows.Next() {
		var tm time.Time
		rows.Scan(&tm)
		times = append(times, tm)
	}
	rows.Close()
	if len(times) != 10 {
		t.Fatalf("%d rows without a prediction, want 10", len(times))
	}
	var failedBatch int
	if err := e.Pool.QueryRow(ctx, `SELECT batch_no FROM regressd_task_batches WHERE task_id = $1 AND status = 'failed'`, taskID).Scan(&failedBatch); err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemas.ResultSchema)
	for _, tm := range times {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(tm.UnixMicro()))
		b.Field(1).(*array.Float64Builder).Append(42)
	}
	rec := b.NewRecordBatch()
	body, err := schemas.EncodeRecord(rec)
	rec.Release()
	b.Release()
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(schemas.TaskMeta{TaskID: taskID, Trigger: "rp", Measurement: "rp", Target: "y", Model: "vendor/model-x",
		Features: []string{"x1", "x2"}, Batches: 2, Start: pipelinetest.T0, End: pipelinetest.T0.Add(100 * time.Hour), RequestTimeout: schemas.Duration(time.Minute)})
	e.PublishRaw("regress.dlq.regress_results.rp", map[string]string{
		schemas.HeaderSchema: schemas.Version, schemas.HeaderTask: string(meta), schemas.HeaderBatch: strconv.Itoa(failedBatch),
		schemas.HeaderStatus: string(schemas.StatusOK), schemas.HeaderReason: "gave up after 50 deliveries: database unreachable",
		schemas.HeaderOrigin: "REGRESS_RESULTS:9999:regress.results.rp"}, body)

	// A job that never ran, as the producer would have dead-lettered it.
	e.MakeTable(pipelinetest.SeriesSpec{Table: "rj", Start: pipelinetest.T0, Rows: 100, GapEach: 5})
	secret, err := os.ReadFile(filepath.Join(e.DataDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := schemas.NewSealer(secret)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := sealer.Seal("test-key", "t_retried_job", time.Hour)
	job, _ := json.Marshal(schemas.Job{Schema: schemas.Version, TaskID: "t_retried_job", Trigger: "rj", SealedKey: sealed,
		Args: pipelinetest.MustArgs(t, pipelinetest.ArgsModel("rj", "vendor/model-x", "")), Start: pipelinetest.T0, End: pipelinetest.T0.Add(100 * time.Hour), Origin: "webhook"})
	e.PublishRaw("regress.dlq.regress_jobs.rj", map[string]string{schemas.HeaderSchema: schemas.Version,
		schemas.HeaderTask: "t_retried_job", schemas.HeaderReason: "gave up after 20 deliveries: database unreachable",
		schemas.HeaderOrigin: "REGRESS_JOBS:9998:regress.jobs.rj"}, job)

	text, err := dlqCLI(e, "retry", "--all")
	if err != nil || !strings.Contains(text, "2 message(s) retried") {
		t.Fatalf("dlq retry --all: %v\n%s", err, text)
	}
	pipelinetest.WaitUntil(t, 30*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = $1 AND status = 'success' AND remaining = 0 AND batches_failed = 0`, taskID) == 1
	}, "the partial task repaired to success")
	if n := e.Count(`SELECT count(*) FROM rp_regressed`); n != 20 {
		t.Fatalf("rp rows=%d, want 20", n)
	}
	pipelinetest.WaitUntil(t, 30*time.Second, func() bool {
		return e.Count(`SELECT count(*) FROM regressd_tasks WHERE task_id = 't_retried_job' AND status = 'success'`) == 1
	}, "the retried job ran")
	if n := e.Count(`SELECT count(*) FROM rj_regressed`); n != 20 {
		t.Fatalf("rj rows=%d, want 20", n)
	}
	if n := len(e.DeadLetters(schemas.SubjectDLQ + ">")); n != 0 {
		t.Fatalf("%d dead letters left after retry", n)
	}
	// A forged origin is refused.
	e.PublishRaw("regress.dlq.regress_jobs.x", map[string]string{schemas.HeaderOrigin: "KV_regress_triggers:1:$KV.regress_triggers.x"}, []byte("{}"))
	if _, err := dlqCLI(e, "retry", "--all"); err == nil || !strings.Contains(err.Error(), "is not a regressd stream") {
		t.Fatalf("retry of a forged origin: %v", err)
	}
}

// TestDLQUnknownSequences: retry and purge say "no dead letter N" of each
// sequence the DLQ does not hold (never used, already retried or purged), as
// show does, and still act on the known ones given alongside.
func TestDLQUnknownSequences(t *testing.T) {
	e := pipelinetest.Start(t)
	for _, task := range []string{"t_unknown_a", "t_unknown_b"} {
		e.PublishRaw("regress.dlq.regress_jobs.uq", map[string]string{schemas.HeaderSchema: schemas.Version, schemas.HeaderTask: task,
			schemas.HeaderReason: "undecodable job", schemas.HeaderOrigin: "REGRESS_JOBS:1:regress.jobs.uq"}, []byte("{not json"))
	}
	got := e.DeadLetters(schemas.SubjectDLQ + ">")
	if len(got) != 2 {
		t.Fatalf("%d dead letters, want 2", len(got))
	}
	a, b := strconv.FormatUint(got[0].Seq, 10), strconv.FormatUint(got[1].Seq, 10)
	for _, tc := range []struct {
		args    []string
		out     []string
		missing []string
	}{
		{[]string{"retry", a, "999"}, []string{"retried " + a + " onto regress.jobs.uq", "1 message(s) retried"}, []string{"999"}},
		{[]string{"retry", a}, []string{"0 message(s) retried"}, []string{a}},
		{[]string{"purge", b, "999", "1000"}, []string{"1 message(s) purged"}, []string{"999", "1000"}},
		{[]string{"purge", a, b}, []string{"0 message(s) purged"}, []string{a, b}},
	} {
		out, err := dlqCLI(e, tc.args...)
		if err == nil || exitCode(err) != 1 {
			t.Fatalf("dlq %v: %v, want exit 1\n%s", tc.args, err, out)
		}
		for _, w := range tc.out {
			if !strings.Contains(out, w) {
				t.Errorf("dlq %v: want %q in\n%s", tc.args, w, out)
			}
		}
		for _, seq := range tc.missing {
			if want := "no dead letter " + seq + " (see 'regressd dlq list')"; !strings.Contains(err.Error(), want) {
				t.Errorf("dlq %v: %v, want %q in it", tc.args, err, want)
			}
		}
		if strings.Contains(err.Error(), "API error") || strings.Contains(err.Error(), "EOF") {
			t.Errorf("dlq %v: a raw server error: %v", tc.args, err)
		}
	}
}

// TestDLQRetryIsVerbatim: a retry puts back the headers the original had and
// no others. The DLQ copy of a message that had no schema version carries
// one all the same, so such a dead letter is refused (its role would refuse
// it again) rather than retried under a version its sender never gave it.
func TestDLQRetryIsVerbatim(t *testing.T) {
	e := pipelinetest.Start(t)
	e.PublishRaw("regress.jobs.vb", map[string]string{schemas.HeaderSchema: schemas.Version, schemas.HeaderTask: "t_verbatim", "X-Sender": "test"}, []byte("{not json"))
	first := waitDLQ(e, 1, 30*time.Second)[0]
	ctx := context.Background()
	str, err := e.P.JS.Stream(ctx, schemas.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	before, err := str.GetMsg(ctx, first.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dlqCLI(e, "retry", strconv.FormatUint(first.Seq, 10)); err != nil {
		t.Fatalf("dlq retry: %v\n%s", err, out)
	}
	// The producer dead-letters it again: the new copy holds what was retried.
	again := waitDLQ(e, 1, 30*time.Second)[0]
	after, err := str.GetMsg(ctx, again.Seq)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(h nats.Header) nats.Header {
		out := nats.Header{}
		for k, v := range h {
			if k != schemas.HeaderOrigin && k != "Regressd-Consumer" && k != "Regressd-Deliveries" && k != nats.MsgIdHdr { // the copy's own
				out[k] = v
			}
		}
		return out
	}
	if b, a := fmt.Sprint(strip(before.Header)), fmt.Sprint(strip(after.Header)); a != b || again.Seq == first.Seq {
		t.Fatalf("retried message's headers %s, the original's %s", a, b)
	}
	if _, err := dlqCLI(e, "purge", strconv.FormatUint(again.Seq, 10)); err != nil {
		t.Fatal(err)
	}

	e.PublishRaw("regress.jobs.vb", map[string]string{"X-Sender": "test"}, []byte(`{"schema":"1"}`))
	unversioned := waitDLQ(e, 1, 30*time.Second)[0]
	seq := strconv.FormatUint(unversioned.Seq, 10)
	out, err := dlqCLI(e, "retry", seq)
	if err == nil || !strings.Contains(err.Error(), "dead letter "+seq+": the original message carried Regressd-Schema \"\", not \""+schemas.Version+"\"") ||
		!strings.Contains(out, "0 message(s) retried") {
		t.Fatalf("retry of an unversioned message: %v\n%s", err, out)
	}
	if _, err := str.GetMsg(ctx, unversioned.Seq); err != nil {
		t.Fatalf("the refused dead letter is gone from the DLQ: %v", err)
	}
}

// Beside a running regressd, dlq with only its --data-dir reaches that
// server's bus (the URL it left in the store) instead of opening a second
// server on the same files.
func TestStoreCommandsReachARunningServer(t *testing.T) {
	e := pipelinetest.Start(t)
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	if err := m.Run(context.Background(), []string{"dlq", "list", "--data-dir", e.DataDir, "--log-level", "error"}); err != nil {
		t.Fatalf("dlq list beside the server: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "the dead-letter queue is empty") {
		t.Fatalf("dlq list: %s", out.String())
	}
}

// A second role process on a data dir in use is refused, not attached to
// the first one's bus (it would lose it when the first stops).
func TestSecondRunOnAStoreInUseIsRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.Run(ctx, []string{"worker", "--data-dir", e.DataDir, "--database-url", e.DBURL, "--log-level", "error"})
	if !errors.Is(err, bus.ErrStoreInUse) {
		t.Fatalf("a worker on the running server's data dir: %v, want ErrStoreInUse\n%s", err, out.String())
	}
}
