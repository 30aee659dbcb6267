package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// TestLoad fires 50 webhook runs on distinct windows and 10 schedules that
// tick together, on one regressd: all complete and every row is written
// once. It reports tasks/s and rows/s (docs/BENCHMARKS.md, "Load"):
//
//	go test ./cmd/regressd -run TestLoad -v                                  # stand-in gateway: the pipeline's own cost
//	REGRESSD_FAULT_PREDICTOR=local go test ./cmd/regressd -run TestLoad -v   # the built-in engine
func TestLoad(t *testing.T) {
	const webhooks, schedules = 50, 10
	model, flags := faultPredictor(t)
	t.Setenv("SERVICE_API_KEY", "test-key") // scheduled runs' key
	e := pipelinetest.Start(t, append(flags, "--concurrency", "4", "--log-level", "info")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- regressd log ---\n%s", e.Logs.String())
		}
	})
	ctx := context.Background()

	// 50 windows of one series, 30 rows to predict in each.
	const span, gapEach = 120, 4
	e.Table(pipelinetest.SeriesSpec{Table: "ld", Start: pipelinetest.T0, Rows: webhooks * span, GapEach: gapEach}, fmt.Sprintf("measurement=ld,field=y,feature_fields=x1 x2,model=%s,min_history=20,predict_batch_size=10", model))
	// 10 measurements that end now, each predicted by a schedule.
	now := time.Now().UTC().Truncate(time.Hour)
	for i := 0; i < schedules; i++ {
		e.MakeTable(pipelinetest.SeriesSpec{Table: fmt.Sprintf("ls%d", i), Start: now.Add(-240 * time.Hour), Rows: 240, GapEach: gapEach})
	}
	wantRows := webhooks*span/gapEach + schedules*240/gapEach

	// Schedules every 5s tick on multiples of 5s: create them, then start
	// the webhooks just before a tick so everything lands together.
	for i := 0; i < schedules; i++ {
		e.CreateTrigger(fmt.Sprintf("ls%d", i), "every:5s", fmt.Sprintf("measurement=ls%d,field=y,feature_fields=x1 x2,model=%s,min_history=20,window=20d,predict_batch_size=10", i, model))
	}
	tick := time.Now().Truncate(5 * time.Second).Add(5 * time.Second)
	if time.Until(tick) < 2*time.Second {
		tick = tick.Add(5 * time.Second)
	}
	time.Sleep(time.Until(tick) - 200*time.Millisecond)
	start := time.Now()
	var wg sync.WaitGroup
	statuses := make([]string, webhooks)
	for i := 0; i < webhooks; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := pipelinetest.T0.Add(time.Duration(i*span) * time.Hour)
			st, out := e.Engine("ld", pipelinetest.Window(from, from.Add(span*time.Hour)))
			if r, ok := out["result"].(map[string]any); ok && st == http.StatusOK {
				statuses[i], _ = r["status"].(string)
			} else {
				statuses[i] = fmt.Sprintf("HTTP %d %v", st, out)
			}
		}()
	}
	wg.Wait()
	pipelinetest.WaitUntil(t, 2*time.Minute, func() bool {
		return e.Count(`SELECT count(DISTINCT trigger_name) FROM regressd_tasks WHERE trigger_name LIKE 'ls%' AND status = 'success'`) == schedules
	}, "every schedule's first tick done")

	var last time.Time
	if err := e.Pool.QueryRow(ctx, `SELECT max(updated) FROM regressd_tasks WHERE status = 'success'`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	took := last.Sub(start)
	for i := 0; i < schedules; i++ { // stop the schedules before counting
		e.Do(http.MethodDelete, "/api/v3/configure/processing_engine_trigger/"+fmt.Sprintf("ls%d", i), nil, nil)
	}
	for i, s := range statuses {
		if s != "success" {
			t.Errorf("webhook %d: %s", i, s)
		}
	}
	// One scheduled task per trigger wrote; later ticks found nothing left.
	var ticks []string
	rows, _ := e.Pool.Query(ctx, `SELECT trigger_name, min(window_end) FROM regressd_tasks WHERE trigger_name LIKE 'ls%' AND written > 0 GROUP BY 1`)
	for rows.Next() {
		var name string
		var end time.Time
		rows.Scan(&name, &end)
		ticks = append(ticks, end.UTC().Format(time.RFC3339))
	}
	rows.Close()
	sort.Strings(ticks)
	if len(ticks) != schedules || ticks[0] != ticks[len(ticks)-1] {
		t.Errorf("the schedules' writing ticks %v: want all %d at one tick", ticks, schedules)
	}
	total, written := 0, 0
	for _, table := range append([]string{"ld"}, func() (s []string) {
		for i := 0; i < schedules; i++ {
			s = append(s, fmt.Sprintf("ls%d", i))
		}
		return s
	}()...) {
		total += e.Count(fmt.Sprintf(`SELECT count(*) FROM %s`, pgx.Identifier{table + "_regressed"}.Sanitize()))
	}
	if err := e.Pool.QueryRow(ctx, `SELECT coalesce(sum(written), 0) FROM regressd_tasks`).Scan(&written); err != nil {
		t.Fatal(err)
	}
	if total != wantRows || written != total {
		t.Errorf("%d rows in the tables, %d written by the tasks; want %d, each once", total, written, wantRows)
	}
	tasks := webhooks + schedules
	report := fmt.Sprintf("load: %d tasks (%d webhooks + %d schedules on one tick), %d rows, in %v: %.1f tasks/s, %.0f rows/s (predictor: %s, GOMAXPROCS %d)",
		tasks, webhooks, schedules, total, took.Round(time.Millisecond), float64(tasks)/took.Seconds(),
		float64(total)/took.Seconds(), map[bool]string{true: "built-in engine", false: "stand-in gateway"}[len(flags) == 0], runtime.GOMAXPROCS(0))
	t.Log(report)
	if p := os.Getenv("REGRESSD_LOAD_REPORT"); p != "" {
		os.WriteFile(p, []byte(report+"\n"), 0o644)
	}
}
