package pipeline_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regressd/regressd/pipeline/pipelinetest"
)

// makeOddTable creates a measurement whose every name needs quoting.
func makeOddTable(e *pipelinetest.Env, table, field, feature1, feature2, tagCol, tagVal string, rows int) {
	e.T.Helper()
	ctx := context.Background()
	id := func(s string) string { return pgx.Identifier{s}.Sanitize() }
	if _, err := e.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s ("time" timestamptz NOT NULL, %s double precision, %s double precision, %s double precision, %s text)`,
		id(table), id(field), id(feature1), id(feature2), id(tagCol))); err != nil {
		e.T.Fatal(err)
	}
	_, err := e.Pool.CopyFrom(ctx, pgx.Identifier{table}, []string{"time", field, feature1, feature2, tagCol}, pgx.CopyFromSlice(rows, func(i int) ([]any, error) {
		x1, x2 := math.Sin(float64(i)/7), math.Cos(float64(i)/11)
		var y any = 2*x1 - x2
		if i%5 == 0 {
			y = nil
		}
		return []any{pipelinetest.T0.Add(time.Duration(i) * time.Hour), y, x1, x2, tagVal}, nil
	}))
	if err != nil {
		e.T.Fatal(err)
	}
}

// Names with quotes, semicolons, spaces and non-ASCII letters, in the table,
// its columns, a tag column and a tag value, are quoted wherever regressd
// uses them: the runs work and nothing else in the database is touched.
// Names PostgreSQL cannot hold are refused with the reason.
func TestIdentifiersAreQuotedOrRefused(t *testing.T) {
	e := pipelinetest.Start(t)
	ctx := context.Background()
	if _, err := e.Pool.Exec(ctx, `CREATE TABLE canary (v int); INSERT INTO canary VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name                                       string
		table, field, f1, f2, tagCol, tagVal, tags string
	}{
		{"quotes and semicolons", `we"ird;DROP TABLE canary;--`, `tëmp "max"`, `wind;speed`, `a'b`, `ho'st`, `x'); DELETE FROM canary;--`, `ho'st:x');`},
		{"unicode", "温度表", "値", "特徴一", "特徴二", "場所", "東京", "場所:東京"},
		{"case and spaces", "Mixed Case", "Y val", "XOne", "xone", "Host", "A", "Host:A"},
		{"a feature with a space", "spaced", "y", "x one", "x two", "h", "a", "h:a"},
	}
	for i, tc := range cases {
		tagVal := tc.tagVal
		if i == 0 {
			tagVal = `x');` // the tag filter below selects this value
		}
		makeOddTable(e, tc.table, tc.field, tc.f1, tc.f2, tc.tagCol, tagVal, 100)
		trig := fmt.Sprintf("odd%d", i)
		a := fmt.Sprintf("measurement=%s,field=%s,feature_fields=%s %s,model=%s,min_history=10,tags=%s",
			tc.table, tc.field, strings.ReplaceAll(tc.f1, " ", ""), strings.ReplaceAll(tc.f2, " ", ""), pipelinetest.DefaultModel(), tc.tags)
		if strings.Contains(tc.f1, " ") {
			// Feature lists are space-separated, so a feature with a space
			// cannot be named in the string form: the body's array form can.
			a = fmt.Sprintf("measurement=%s,field=%s,model=%s,min_history=10,tags=%s", tc.table, tc.field, pipelinetest.DefaultModel(), tc.tags)
		}
		e.CreateTrigger(trig, "request:"+trig, a)
		body := pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(100*time.Hour))
		if strings.Contains(tc.f1, " ") {
			body["feature_fields"] = []string{tc.f1, tc.f2}
			if st, out := e.Engine(trig, body); st != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["message"]), "white space") {
				t.Errorf("%s: a feature name with a space: HTTP %d %v, want a clear 400", tc.name, st, out)
			}
			continue
		}
		st, out := e.Engine(trig, body)
		if r, ok := out["result"].(map[string]any); st != http.StatusOK || !ok || r["status"] != "success" || pipelinetest.Num(r["written"]) != 20 {
			t.Errorf("%s: HTTP %d %v, want 20 rows written", tc.name, st, out)
			continue
		}
		n := e.Count(fmt.Sprintf(`SELECT count(*) FROM %s WHERE source = $1 AND target = $2 AND %s = $3`,
			pgx.Identifier{tc.table + "_regressed"}.Sanitize(), pgx.Identifier{tc.tagCol}.Sanitize()), tc.table, tc.field, tagVal)
		if n != 20 {
			t.Errorf("%s: %d rows in %q, want 20 with the tag copied verbatim", tc.name, n, tc.table+"_regressed")
		}
		// skip_existing finds them again through the same quoting.
		if _, out := e.Engine(trig, pipelinetest.Window(pipelinetest.T0, pipelinetest.T0.Add(101*time.Hour))); pipelinetest.Result(t, out)["status"] != "skipped" {
			t.Errorf("%s: second run %v, want skipped", tc.name, out)
		}
	}
	if n := e.Count(`SELECT count(*) FROM canary`); n != 2 {
		t.Fatalf("canary has %d rows, want 2", n)
	}

	// A body naming a table that is an injection attempt finds no such table.
	e.CreateTrigger("open", "request:open", "model="+pipelinetest.DefaultModel()+",min_history=10")
	st, out := e.Engine("open", map[string]any{"measurement": "canary; DROP TABLE canary", "field": "v", "feature_fields": "v2"})
	if st != http.StatusNotFound || !strings.Contains(fmt.Sprint(out["message"]), `"canary; DROP TABLE canary" does not exist`) {
		t.Errorf("injection through the body: HTTP %d %v", st, out)
	}
	if n := e.Count(`SELECT count(*) FROM canary`); n != 2 {
		t.Fatalf("canary has %d rows, want 2", n)
	}

	// Names PostgreSQL cannot hold are refused, saying why.
	refused := []struct{ args, want string }{
		{"measurement=" + strings.Repeat("m", 55) + ",field=y,feature_fields=x,model=" + pipelinetest.DefaultModel(), "63-byte identifier limit"},
		{"measurement=m,field=" + strings.Repeat("f", 64) + ",feature_fields=x,model=" + pipelinetest.DefaultModel(), "longer than PostgreSQL's 63-byte"},
		{"measurement=m\x00x,field=y,feature_fields=x,model=" + pipelinetest.DefaultModel(), "NUL byte"},
		{"measurement=m,field=y,feature_fields=__target,model=" + pipelinetest.DefaultModel(), "reserved name"},
	}
	for _, r := range refused {
		status, body := e.Do(http.MethodPost, "/api/v3/configure/processing_engine_trigger", nil,
			map[string]any{"trigger_name": "bad", "trigger_specification": "request:bad", "trigger_arguments": r.args})
		if status != http.StatusBadRequest || !strings.Contains(string(body), r.want) {
			t.Errorf("trigger with %q: HTTP %d %s, want 400 saying %q", r.args, status, body, r.want)
		}
	}
}
