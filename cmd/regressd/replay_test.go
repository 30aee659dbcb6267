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

	"github.com/regressd/regressd/schemas"
)

func (e *env) replayCLI(args ...string) (string, error) {
	e.t.Helper()
	var out bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &out}
	args = append([]string{"replay", "--nats-url", e.st.Embedded.ClientURL(), "--data-dir", e.dataDir, "--log-level", "error"}, args...)
	err := m.Run(context.Background(), args)
	return out.String(), err
}

func (e *env) jobsInStream() uint64 {
	e.t.Helper()
	str, err := e.st.JS.Stream(context.Background(), schemas.StreamJobs)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := str.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.LastSeq
}

// predictions returns time → value of a regressed table.
func (e *env) predictions(table string) map[time.Time]float64 {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT "time", value FROM `+table)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[time.Time]float64{}
	for rows.Next() {
		var tm time.Time
		var v float64
		if err := rows.Scan(&tm, &v); err != nil {
			e.t.Fatal(err)
		}
		out[tm.UTC()] = v
	}
	return out
}

func TestReplayBackfill(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "replay-canary-9d2f")
	e := startEnv(t)
	e.makeTable(seriesSpec{table: "rb", start: t0, rows: 300, gapEach: 10})
	e.createTrigger("rb", "request:rb", args("rb", "predict_batch_size=5"))
	before := time.Now().UTC()
	for i := 0; i < 3; i++ {
		w := window(t0.Add(time.Duration(100*i)*time.Hour), t0.Add(time.Duration(100*(i+1))*time.Hour))
		if _, out := e.engine("rb", w); result(t, out)["status"] != "success" {
			t.Fatalf("window %d: %v", i, out)
		}
	}
	after := time.Now().UTC()
	want := e.predictions("rb_regressed")
	if len(want) != 30 {
		t.Fatalf("%d predictions, want 30", len(want))
	}

	// Everything again: skip_existing pays for nothing twice.
	out, err := e.replayCLI("--trigger", "rb", "--since", "1h")
	if err != nil || !strings.Contains(out, "replayed trigger rb: 3 window(s)") || !strings.Contains(out, "skipped 3") ||
		!strings.Contains(out, "0 row(s) written; 30 row(s) skipped as already predicted") {
		t.Fatalf("replay --since 1h: %v\n%s", err, out)
	}
	if n := e.count(`SELECT count(*) FROM regressd_task_batches b JOIN regressd_tasks t USING (task_id) WHERE t.origin = 'replay' AND b.batch_no >= 0`); n != 0 {
		t.Fatalf("the replay sent %d batches to the model, want none", n)
	}

	// A window lost its predictions: the replay of the original jobs only
	// (not the replay's own) refills it, with the same values.
	if _, err := e.pool.Exec(context.Background(), `DELETE FROM rb_regressed WHERE "time" >= $1 AND "time" < $2`, t0.Add(100*time.Hour), t0.Add(200*time.Hour)); err != nil {
		t.Fatal(err)
	}
	out, err = e.replayCLI("--trigger", "rb", "--since", before.Format(time.RFC3339Nano), "--until", after.Format(time.RFC3339Nano))
	if err != nil || !strings.Contains(out, "3 window(s)") || !strings.Contains(out, "success 1, skipped 2") || !strings.Contains(out, "10 row(s) written") {
		t.Fatalf("replay --since/--until: %v\n%s", err, out)
	}
	got := e.predictions("rb_regressed")
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
	out, err = e.replayCLI("--trigger", "rb", "--from-seq", "3", "--dry-run")
	if err != nil || !strings.Contains(out, "would re-run 3 window(s)") {
		t.Fatalf("replay --from-seq 3 --dry-run: %v\n%s", err, out)
	}

	// Never-scheduled ranges: windows cut from the trigger's arguments.
	e.makeTable(seriesSpec{table: "rr", start: t0, rows: 200, gapEach: 10})
	e.createTrigger("rr", "every:1d", args("rr", "window=100d"))
	jobs := e.jobsInStream()
	out, err = e.replayCLI("--trigger", "rr", "--start", t0.Format(time.RFC3339), "--end", t0.Add(200*time.Hour).Format(time.RFC3339), "--step", "50h", "--dry-run")
	if err != nil || !strings.Contains(out, "would re-run 4 window(s)") || e.jobsInStream() != jobs {
		t.Fatalf("range --dry-run: %v (published %d)\n%s", err, e.jobsInStream()-jobs, out)
	}
	out, err = e.replayCLI("--trigger", "rr", "--start", t0.Format(time.RFC3339), "--end", t0.Add(200*time.Hour).Format(time.RFC3339), "--step", "50h", "--parallel", "2")
	if err != nil || !strings.Contains(out, "success 4") || !strings.Contains(out, "20 row(s) written") || !strings.Contains(out, "4/4 · 20 rows written · 0 failed") {
		t.Fatalf("range replay: %v\n%s", err, out)
	}
	if n := e.count(`SELECT count(*) FROM rr_regressed`); n != 20 {
		t.Fatalf("rr rows=%d, want 20", n)
	}
}

func checkReplayedKey(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	str, err := e.st.JS.Stream(ctx, schemas.StreamJobs)
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
	secret, _ := os.ReadFile(filepath.Join(e.dataDir, "secret"))
	sealer, _ := schemas.NewSealer(secret)
	if key, err := sealer.Open(job.SealedKey); err != nil || key != "replay-canary-9d2f" {
		t.Fatalf("sealed key opens to %q, %v", key, err)
	}
}

func TestReplayRefusesUnclearRequests(t *testing.T) {
	e := startEnv(t)
	e.createTrigger("partial", "request:partial", "model="+defaultModel())
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
		if _, err := e.replayCLI(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("replay %v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if out, err := e.replayCLI("--trigger", "partial", "--since", "1d"); err != nil || !strings.Contains(out, "nothing to replay") {
		t.Errorf("replay of a trigger without jobs: %v %s", err, out)
	}
}

// replayTrigger makes a table and a request trigger for it, and runs one
// window through the engine so the trigger has a job in REGRESS_JOBS.
func (e *env) replayTrigger(name string) {
	e.t.Helper()
	e.makeTable(seriesSpec{table: name, start: t0, rows: 100, gapEach: 10})
	e.createTrigger(name, "request:"+name, args(name, "window=2d"))
	if _, out := e.engine(name, window(t0, t0.Add(50*time.Hour))); result(e.t, out)["status"] != "success" {
		e.t.Fatalf("first run: %v", out)
	}
}

// replayRefused runs replay and wants it refused with exit status 1, every
// want in the error, and nothing published.
func (e *env) replayRefused(args []string, want ...string) {
	e.t.Helper()
	jobs := e.jobsInStream()
	out, err := e.replayCLI(args...)
	if err == nil || exitCode(err) != 1 {
		e.t.Fatalf("replay %v: %v (exit %d), want refused with exit 1\n%s", args, err, exitCode(err), out)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			e.t.Errorf("replay %v: %v, want %q in it", args, err, w)
		}
	}
	if n := e.jobsInStream() - jobs; n != 0 {
		e.t.Errorf("replay %v published %d job(s)", args, n)
	}
}

// TestReplayNamesRangeWindowsOnce: the range form says how long its windows
// are once, briefly ("2 window(s) of 24h", not "windows of 24h0m0s").
func TestReplayNamesRangeWindowsOnce(t *testing.T) {
	e := startEnv(t)
	e.replayTrigger("rw")
	span := []string{"--start", t0.Format(time.RFC3339), "--end", t0.Add(48 * time.Hour).Format(time.RFC3339)}
	out, err := e.replayCLI(append([]string{"--trigger", "rw", "--step", "24h", "--dry-run"}, span...)...)
	if err != nil || !strings.Contains(out, "would re-run 2 window(s) of 24h in [2026-01-01T00:00:00Z, 2026-01-03T00:00:00Z) (trigger rw):") {
		t.Fatalf("range --dry-run: %v\n%s", err, out)
	}
	out, err = e.replayCLI(append([]string{"--trigger", "rw"}, span...)...)
	if err != nil || !strings.Contains(out, "replayed trigger rw: 1 window(s) of 48h in [2026-01-01T00:00:00Z, 2026-01-03T00:00:00Z); took ") {
		t.Fatalf("range replay: %v\n%s", err, out)
	}
}

// TestReplayRefusesEmptySpan: --until not after --since is refused like
// --end not after --start, before anything is published.
func TestReplayRefusesEmptySpan(t *testing.T) {
	e := startEnv(t)
	e.replayTrigger("rs")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "1h", "--until", "2h"}, "is not before --until"},
		{[]string{"--since", "2026-01-02", "--until", "2026-01-02"}, "--since 2026-01-02T00:00:00Z is not before --until 2026-01-02T00:00:00Z"},
		{[]string{"--start", "2026-01-02", "--end", "2026-01-01"}, "--start 2026-01-02T00:00:00Z is not before --end"},
	} {
		e.replayRefused(append([]string{"--trigger", "rs"}, tc.args...), tc.want)
	}
}

// TestReplayRefusesMissingTrigger: a trigger that does not exist (never, or
// deleted with its jobs still in the stream) is refused in both forms, as
// the engine endpoint refuses it.
func TestReplayRefusesMissingTrigger(t *testing.T) {
	e := startEnv(t)
	e.replayTrigger("rm")
	span := []string{"--start", t0.Format(time.RFC3339), "--end", t0.Add(48 * time.Hour).Format(time.RFC3339)}
	e.replayRefused([]string{"--trigger", "nosuch", "--since", "10m"}, `trigger not found: "nosuch"`, "replay runs only existing triggers")
	e.replayRefused([]string{"--trigger", "nosuch", "--from-seq", "1"}, `trigger not found: "nosuch"`)
	e.replayRefused(append([]string{"--trigger", "nosuch"}, span...), `trigger not found: "nosuch"`)
	if st, body := e.do(http.MethodDelete, "/api/v3/configure/processing_engine_trigger?trigger_name=rm", nil, nil); st != http.StatusOK {
		t.Fatalf("delete: HTTP %d: %s", st, body)
	}
	e.replayRefused([]string{"--trigger", "rm", "--since", "1h"}, `trigger not found: "rm"`, "creating it again")
}

// TestReplayRefusesDisabledTrigger: a disabled trigger is refused in both
// forms, as the engine endpoint refuses it (409), saying how to enable it.
func TestReplayRefusesDisabledTrigger(t *testing.T) {
	e := startEnv(t)
	e.replayTrigger("rd")
	if st, _ := e.do(http.MethodPost, "/api/v3/configure/processing_engine_trigger/disable?trigger_name=rd", nil, nil); st != http.StatusOK {
		t.Fatalf("disable: HTTP %d", st)
	}
	span := []string{"--start", t0.Format(time.RFC3339), "--end", t0.Add(48 * time.Hour).Format(time.RFC3339)}
	e.replayRefused([]string{"--trigger", "rd", "--since", "1h"}, `trigger "rd" is disabled`, "regressd trigger enable rd")
	e.replayRefused(append([]string{"--trigger", "rd"}, span...), `trigger "rd" is disabled`, "regressd trigger enable rd")
}
