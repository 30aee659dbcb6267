package pipeline_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// TestSharedOutputOtherTagColumns: sources with different tag columns
// cannot share an output table. The first writer keys it; a run of a
// source with other tag columns fails at once with 409 naming both sets
// (no retry, no dead letter, the owner's index untouched), and creating
// such a trigger once the table is there is refused.
func TestSharedOutputOtherTagColumns(t *testing.T) {
	e := pipelinetest.Start(t)
	e.MakeTable(pipelinetest.SeriesSpec{Table: "ws", Tags: map[string]string{"station": "A"}, Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "ws", Tags: map[string]string{"station": "B"}, Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	e.MakeTable(pipelinetest.SeriesSpec{Table: "Température", Start: pipelinetest.T0, Rows: 60, GapEach: 10})
	e.CreateTrigger("s3a", "request:s3a", pipelinetest.Args("ws", "tags=station:A,output_measurement=shared3"))
	e.CreateTrigger("s3b", "request:s3b", pipelinetest.Args("Température", "output_measurement=shared3"))
	e.CreateTrigger("s3c", "request:s3c", pipelinetest.Args("ws", "tags=station:B,output_measurement=shared3"))
	w := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))
	run := func(trigger string) (int, string) {
		t.Helper()
		st, out := e.Engine(trigger, w)
		if st != http.StatusOK {
			t.Fatalf("%s: HTTP %d %v", trigger, st, out)
		}
		msg, _ := pipelinetest.Result(t, out)["message"].(string)
		return pipelinetest.Num(out["code"]), msg
	}
	if code, msg := run("s3a"); code != 0 {
		t.Fatalf("s3a: code %d %s", code, msg)
	}
	code, msg := run("s3b")
	if code != http.StatusConflict {
		t.Errorf("s3b: code %d %q, want 409", code, msg)
	}
	for _, want := range []string{"(station)", "(none)", `"Température"`, "output_measurement"} {
		if !strings.Contains(msg, want) {
			t.Errorf("s3b: message %q lacks %q", msg, want)
		}
	}
	if code, msg := run("s3c"); code != 0 {
		t.Errorf("s3c after s3b's refusal: code %d %s", code, msg)
	}
	if n := e.Count(`SELECT count(DISTINCT station) FROM shared3 WHERE source = 'ws'`); n != 2 {
		t.Errorf("shared3 holds %d stations, want 2", n)
	}
	if n := e.Count(`SELECT count(*) FROM shared3 WHERE source = 'Température'`); n != 0 {
		t.Errorf("shared3 holds %d rows of the refused source", n)
	}
	if dl := e.DeadLetters(""); len(dl) != 0 {
		t.Errorf("dead letters: %v", dl)
	}
	st, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
		map[string]any{"trigger_name": "s3d", "trigger_specification": "every:1h", "trigger_arguments": pipelinetest.Args("Température", "output_measurement=shared3")})
	var out struct{ Error string }
	json.Unmarshal(body, &out)
	if st != http.StatusBadRequest || !strings.Contains(out.Error, "(station)") || !strings.Contains(out.Error, "(none)") {
		t.Errorf("creating a trigger with other tag columns into shared3: HTTP %d %s", st, body)
	}
}
