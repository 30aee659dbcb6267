package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

func replayCLI(e *pipelinetest.Env, args ...string) (string, error) {
	e.T.Helper()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	args = append([]string{"replay", "--nats-url", e.P.Embedded.ClientURL(), "--data-dir", e.DataDir, "--log-level", "error"}, args...)
	err := m.Run(context.Background(), args)
	return out.String(), err
}

func jobsInStream(e *pipelinetest.Env) uint64 {
	e.T.Helper()
	str, err := e.P.JS.Stream(context.Background(), schemas.StreamJobs)
	if err != nil {
		e.T.Fatal(err)
	}
	info, err := str.Info(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	return info.State.LastSeq
}

// predictions returns time → value of a regressed table.
func predictions(e *pipelinetest.Env, table string) map[time.Time]float64 {
	e.T.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT "time", value FROM `+table)
	if err != nil {
		e.T.Fatal(err)
	}
	defer rows.Close()
	out := map[time.Time]float64{}
	for rows.Next() {
		var tm time.Time
		var v float64
		if err := rows.Scan(&tm, &v); err != nil {
			e.T.Fatal(err)
		}
		out[tm.UTC()] = v
	}
	return out
}

func TestReplayBackfill(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "replay-canary-9d2f")
	e := pipelinetest.Start(t)
	e.Table(pipelinetest.SeriesSpec{Table: "rb", Start: pipelinetest.T0, Rows: 300, GapEach: 10}, pipelinetest.Args("rb", "predict_batch_size=5"))
	before := time.Now().UTC()
	for i := 0; i < 3; i++ {
		w := pipelinetest.Window(pipelinetest.T0.Add(time.Duration(100*i)*time.Hour), pipelinetest.T0.Add(time.Duration(100*(i+1))*time.Hour))
		if _, out := e.Engine("rb", w); pipelinetest.Result(t, out)["status"] != "success" {
			t.Fatalf("window %d: %v", i, out)
		}
	}
	after := time.Now().UTC()
	want := predictions(e, "rb_regressed")
	if len(want) != 30 {
		t.Fatalf("%d predictions, want 30", len(want))
	}

	// Everything again: skip_existing pays for nothing twice.
	out, err := replayCLI(e, "--trigger", "rb", "--since", "1h")
	if err != nil || !strings.Contains(out, "replayed trigger rb: 3 window(s)") || !strings.Contains(out, "skipped 3") ||
		!strings.Contains(out, "0 row(s) written; 30 row(s) skipped as already predicted") {
		t.Fatalf("replay --since 1h: %v\n%s", err, out)
	}
	if n := e.Count(`SELECT count(*) FROM regressd_task_batches b JOIN regressd_tasks t USING (task_id) WHERE t.origin = 'replay' AND b.batch_no >= 0`); n != 0 {
		t.Fatalf("the replay sent %d batches to the model, want none", n)
	}

	// A window lost its predictions: the replay of the original jobs only
	// (not the replay's own) refills it, with the same values.
	if _, err := e.Pool.Exec(context.Background(), `DELETE FROM rb_regressed WHERE "time" >= $1 AND "time" < $2`, pipelinetest.T0.Add(100*time.Hour), pipelinetest.T0.Add(200*time.Hour)); err != nil {
		t.Fatal(err)
	}
	out, err = replayCLI(e, "--trigger", "rb", "--since", before.Format(time.RFC3339Nano), "--until", after.Format(time.RFC3339Nano))
	if err != nil || !strings.Contains(out, "3 window(s)") || !strings.Contains(out, "success 1, skipped 2") || !strings.Contains(out, "10 row(s) written") {
		t.Fatalf("replay --since/--until: %v\n%s", err, out)
	}
	got := predictions(e, "rb_regressed")
	if len(got) != len(want) {
		t.Fatalf("%d predictions after the backfill, want %d", len(got), len(want))
	}
	for tm, v := range want {
		if got[tm] != v {
			t.Fatalf("prediction at %s = %v after the backfill, was %v", tm, got[tm], v)
		}
	}

	// The replayed jobs carry the key sealed, never plain, and from SERVICE_API_KEY.
	checkReplayedKey(t, e)

	// --from-seq 3: the last original window and the replays after it.
	out, err = replayCLI(e, "--trigger", "rb", "--from-seq", "3", "--dry-run")
	if err != nil || !strings.Contains(out, "would re-run 3 window(s)") {
		t.Fatalf("replay --from-seq 3 --dry-run: %v\n%s", err, out)
	}

	// Never-scheduled ranges: windows cut from the trigger's arguments.
	e.MakeTable(pipelinetest.SeriesSpec{Table: "rr", Start: pipelinetest.T0, Rows: 200, GapEach: 10})
	e.CreateTrigger("rr", "every:1d", pipelinetest.Args("rr", "window=100d"))
	jobs := jobsInStream(e)
	out, err = replayCLI(e, "--trigger", "rr", "--start", pipelinetest.T0.Format(time.RFC3339), "--end", pipelinetest.T0.Add(200*time.Hour).Format(time.RFC3339), "--step", "50h", "--dry-run")
	if err != nil || !strings.Contains(out, "would re-run 4 window(s)") || jobsInStream(e) != jobs {
		t.Fatalf("range --dry-run: %v (published %d)\n%s", err, jobsInStream(e)-jobs, out)
	}
	out, err = replayCLI(e, "--trigger", "rr", "--start", pipelinetest.T0.Format(time.RFC3339), "--end", pipelinetest.T0.Add(200*time.Hour).Format(time.RFC3339), "--step", "50h", "--parallel", "2")
	if err != nil || !strings.Contains(out, "success 4") || !strings.Contains(out, "20 row(s) written") || !strings.Contains(out, "4/4 · 20 rows written · 0 failed") {
		t.Fatalf("range replay: %v\n%s", err, out)
	}
	if n := e.Count(`SELECT count(*) FROM rr_regressed`); n != 20 {
		t.Fatalf("rr rows=%d, want 20", n)
	}
}

func checkReplayedKey(t *testing.T, e *pipelinetest.Env) {
	t.Helper()
	ctx := context.Background()
	str, err := e.P.JS.Stream(ctx, schemas.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := str.GetLastMsgForSubject(ctx, "regress.jobs.rb")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw.Data, []byte("replay-canary-9d2f")) {
		t.Fatal("the key is in plain text on the bus")
	}
	var job schemas.Job
	if err := json.Unmarshal(raw.Data, &job); err != nil || job.Origin != "replay" {
		t.Fatalf("last job %v: %s", err, raw.Data)
	}
	secret, _ := os.ReadFile(filepath.Join(e.DataDir, "secret"))
	sealer, _ := schemas.NewSealer(secret)
	if key, err := sealer.Open(job.SealedKey, job.TaskID); err != nil || key != "replay-canary-9d2f" {
		t.Fatalf("sealed key opens to %q, %v", key, err)
	}
}

func TestReplayRefusesUnclearRequests(t *testing.T) {
	e := pipelinetest.Start(t)
	e.CreateTrigger("partial", "request:partial", "model="+pipelinetest.DefaultModel())
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--since", "1d"}, "--trigger is required"},
		{[]string{"--trigger", "x"}, "say what to replay"},
		{[]string{"--trigger", "x", "--since", "1d", "--start", "2026-01-01", "--end", "2026-01-02"}, "not both"},
		{[]string{"--trigger", "x", "--start", "2026-01-01"}, "--start and --end go together"},
		{[]string{"--trigger", "x", "--start", "2026-01-01", "--end", "2026-01-02", "--until", "1d"}, "--until goes with"},
		{[]string{"--trigger", "x", "--since", "yesterday"}, `--since "yesterday": want RFC 3339`},
		{[]string{"--trigger", "x", "--start", "2026-01-02", "--end", "2026-01-01"}, "is not before"},
		{[]string{"--trigger", "nope", "--start", "2026-01-01", "--end", "2026-01-02"}, `trigger "nope"`},
		{[]string{"--trigger", "partial", "--start", "2026-01-01", "--end", "2026-01-02"}, "leave some to the request body"},
	}
	for _, tc := range cases {
		if _, err := replayCLI(e, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replay %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if out, err := replayCLI(e, "--trigger", "partial", "--since", "1d"); err != nil || !strings.Contains(out, "nothing to replay") {
		t.Errorf("replay of a trigger without jobs: %v %s", err, out)
	}
}

// replayTrigger makes a table and a request trigger for it, and runs one
// window through the engine so the trigger has a job in REGRESS_JOBS.
func replayTrigger(e *pipelinetest.Env, name string) {
	e.T.Helper()
	e.MakeTable(pipelinetest.SeriesSpec{Table: name, Start: pipelinetest.T0, Rows: 100, GapEach: 10})
	e.CreateTrigger(name, "request:"+name, pipelinetest.Args(name, "window=2d"))
	if _, out := e.Engine(name, pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(50*time.Hour))); pipelinetest.Result(e.T, out)["status"] != "success" {
		e.T.Fatalf("first run: %v", out)
	}
}

// replayRefused runs replay and wants it refused with exit status 1, every
// want in the error, and nothing published.
func replayRefused(e *pipelinetest.Env, args []string, want ...string) {
	e.T.Helper()
	jobs := jobsInStream(e)
	out, err := replayCLI(e, args...)
	if err == nil || exitCode(err) != 1 {
		e.T.Fatalf("replay %v: %v (exit %d), want refused with exit 1\n%s", args, err, exitCode(err), out)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			e.T.Errorf("replay %v: %v, want %q in it", args, err, w)
		}
	}
	if n := jobsInStream(e) - jobs; n != 0 {
		e.T.Errorf("replay %v published %d job(s)", args, n)
	}
}

// TestReplayNamesRangeWindowsOnce: the range form says how long its windows
// are once, briefly ("2 window(s) of 24h", not "windows of 24h0m0s").
func TestReplayNamesRangeWindowsOnce(t *testing.T) {
	e := pipelinetest.Start(t)
	replayTrigger(e, "rw")
	span := []string{"--start", pipelinetest.T0.Format(time.RFC3339), "--end", pipelinetest.T0.Add(48 * time.Hour).Format(time.RFC3339)}
	out, err := replayCLI(e, append([]string{"--trigger", "rw", "--step", "24h", "--dry-run"}, span...)...)
	if err != nil || !strings.Contains(out, "would re-run 2 window(s) of 24h in [2026-01-01T00:00:00Z, 2026-01-03T00:00:00Z) (trigger rw):") {
		t.Fatalf("range --dry-run: %v\n%s", err, out)
	}
	out, err = replayCLI(e, append([]string{"--trigger", "rw"}, span...)...)
	if err != nil || !strings.Contains(out, "replayed trigger rw: 1 window(s) of 48h in [2026-01-01T00:00:00Z, 2026-01-03T00:00:00Z); took ") {
		t.Fatalf("range replay: %v\n%s", err, out)
	}
}

// TestReplayRefusesEmptySpan: --until not after --since is refused like
// --end not after --start, before anything is published.
func TestReplayRefusesEmptySpan(t *testing.T) {
	e := pipelinetest.Start(t)
	replayTrigger(e, "rs")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "1h", "--until", "2h"}, "is not before --until"},
		{[]string{"--since", "2026-01-02", "--until", "2026-01-02"}, "--since 2026-01-02T00:00:00Z is not before --until 2026-01-02T00:00:00Z"},
		{[]string{"--start", "2026-01-02", "--end", "2026-01-01"}, "--start 2026-01-02T00:00:00Z is not before --end"},
	} {
		replayRefused(e, append([]string{"--trigger", "rs"}, tc.args...), tc.want)
	}
}

// TestReplayRefusesMissingTrigger: a trigger that does not exist (never, or
// deleted with its jobs still in the stream) is refused in both forms, as
// the engine endpoint refuses it.
func TestReplayRefusesMissingTrigger(t *testing.T) {
	e := pipelinetest.Start(t)
	replayTrigger(e, "rm")
	span := []string{"--start", pipelinetest.T0.Format(time.RFC3339), "--end", pipelinetest.T0.Add(48 * time.Hour).Format(time.RFC3339)}
	replayRefused(e, []string{"--trigger", "nosuch", "--since", "10m"}, `trigger not found: "nosuch"`, "replay runs only existing triggers")
	replayRefused(e, []string{"--trigger", "nosuch", "--from-seq", "1"}, `trigger not found: "nosuch"`)
	replayRefused(e, append([]string{"--trigger", "nosuch"}, span...), `trigger not found: "nosuch"`)
	if st, body := e.Do(http.MethodDelete, "/api/v3/configure/processing_engine_trigger?trigger_name=rm", nil, nil); st != http.StatusOK {
		t.Fatalf("delete: HTTP %d: %s", st, body)
	}
	replayRefused(e, []string{"--trigger", "rm", "--since", "1h"}, `trigger not found: "rm"`, "creating it again")
}

// TestReplayRefusesDisabledTrigger: a disabled trigger is refused in both
// forms, as the engine endpoint refuses it (409), saying how to enable it.
func TestReplayRefusesDisabledTrigger(t *testing.T) {
	e := pipelinetest.Start(t)
	replayTrigger(e, "rd")
	if st, _ := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger/disable?trigger_name=rd", nil, nil); st != http.StatusOK {
		t.Fatalf("disable: HTTP %d", st)
	}
	span := []string{"--start", pipelinetest.T0.Format(time.RFC3339), "--end", pipelinetest.T0.Add(48 * time.Hour).Format(time.RFC3339)}
	replayRefused(e, []string{"--trigger", "rd", "--since", "1h"}, `trigger "rd" is disabled`, "regressd trigger enable rd")
	replayRefused(e, append([]string{"--trigger", "rd"}, span...), `trigger "rd" is disabled`, "regressd trigger enable rd")
}
