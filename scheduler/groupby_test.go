package scheduler

import (
	"strings"
	"testing"

	"github.com/regressd/regressd/schemas"
)

func TestGroupByArgs(t *testing.T) {
	args, _ := SplitArgs(base + ",group_by=site  region site,max_run_predict_rows=300")
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.GroupBy, " ") != "site region" || r.MaxRunPredictRows != 300 {
		t.Fatalf("group_by %q, max_run_predict_rows %d", r.GroupBy, r.MaxRunPredictRows)
	}
	args, _ = SplitArgs(base)
	if r, _ = ResolveArgs(args, false, nil); len(r.GroupBy) != 0 || r.MaxRunPredictRows != schemas.DefaultMaxRunPredictRows {
		t.Fatalf("defaults: group_by %q, max_run_predict_rows %d", r.GroupBy, r.MaxRunPredictRows)
	}
	for in, want := range map[string]string{
		"group_by=time":             `group_by: "time" is the timestamp column`,
		"group_by=y":                `group_by: "y" is the target field`,
		"group_by=a":                `group_by: "a" is a feature field`,
		"max_run_predict_rows=0":    "max_run_predict_rows: must be at least 1",
		"max_run_predict_rows=many": `max_run_predict_rows: "many" is not a whole number`,
	} {
		args, _ := SplitArgs(base + "," + in)
		if _, err := ResolveArgs(args, false, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	// Trigger-only: a request body cannot set it.
	if _, err := ParseEngineBody([]byte(`{"group_by": "site"}`), map[string]string{}); err == nil || !strings.Contains(err.Error(), `body key "group_by" is an operator setting`) {
		t.Errorf("group_by in a body: %v", err)
	}
}
