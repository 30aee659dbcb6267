package main

import (
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// A backfill of a group_by trigger fills every series of every window.
func TestReplayGroupBy(t *testing.T) {
	t.Setenv("SERVICE_API_KEY", "replay-canary-4c1a")
	e := pipelinetest.Start(t)
	for _, site := range []string{"a", "b"} {
		e.MakeTable(pipelinetest.SeriesSpec{Table: "rg", Tags: map[string]string{"site": site}, Start: pipelinetest.T0, Rows: 200, GapEach: 10})
	}
	e.CreateTrigger("rg", "request:rg", pipelinetest.Args("rg", "group_by=site"))
	out, err := replayCLI(e, "--trigger", "rg", "--start", pipelinetest.T0.Format(time.RFC3339),
		"--end", pipelinetest.T0.Add(200*time.Hour).Format(time.RFC3339), "--step", "100h")
	if err != nil || !strings.Contains(out, "40 row(s) written") {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	for _, site := range []string{"a", "b"} {
		if got := e.Count(`SELECT count(DISTINCT "time") FROM rg_regressed WHERE site = $1`, site); got != 20 {
			t.Errorf("site %s: %d rows, want 20", site, got)
		}
	}
	if got := e.Count(`SELECT count(*) FROM regressd_tasks WHERE trigger_name = 'rg' AND parent_id = '' AND origin = 'replay' AND series_total = 2 AND status = 'success'`); got != 2 {
		t.Errorf("%d replayed group_by runs of 2 series succeeded, want 2", got)
	}
}
