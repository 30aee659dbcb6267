package scheduler

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// createTrigger posts a trigger to the admin API.
func createTrigger(t *testing.T, mux *http.ServeMux, name, spec, args string) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"trigger_name": name, "trigger_specification": spec, "trigger_arguments": args})
	return do(t, mux, http.MethodPost, "/api/v3/configure/processing_engine_trigger", string(b))
}

// A trigger that no run could satisfy is refused when it is created, every
// problem named.
func TestCreateRefusesAnUnrunnableTrigger(t *testing.T) {
	_, mux, _ := newTestScheduler(t)
	cases := []struct {
		name, spec, args string
		want             []string // empty: created
	}{
		{"request without model", "request:r1", "measurement=m,field=y",
			[]string{`"model" is required: a request body cannot supply it`}},
		{"request leaving the table to the body", "request:r2", "model=v/m", nil},
		{"cron that never fires", "cron:0 0 30 2 *", "measurement=m,field=y,feature_fields=a,model=v/m", []string{"never fires"}},
		{"cron on a leap day", "cron:0 0 29 2 *", "measurement=m,field=y,feature_fields=a,model=v/m", nil},
		{"every overflows", "every:100000000000d", "measurement=m,field=y,feature_fields=a,model=v/m", []string{"too large"}},
		{"schedule names each missing", "every:1h", "field=y",
			[]string{`"measurement" is required`, `"feature_fields" is required`, `"model" is required`}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := createTrigger(t, mux, fmt.Sprintf("t%d", i), tc.spec, tc.args)
			if len(tc.want) == 0 {
				if code != http.StatusCreated {
					t.Fatalf("HTTP %d %v, want 201", code, out)
				}
				return
			}
			msg, _ := out["error"].(string)
			if code != http.StatusBadRequest {
				t.Fatalf("HTTP %d %v, want 400", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// One request path, one trigger: a second is refused, naming the first.
func TestCreateRefusesATakenPath(t *testing.T) {
	_, mux, _ := newTestScheduler(t)
	const args = "measurement=m,field=y,feature_fields=a,model=v/m"
	if code, out := createTrigger(t, mux, "plant", "request:plant", args); code != http.StatusCreated {
		t.Fatalf("first: HTTP %d %v", code, out)
	}
	code, out := createTrigger(t, mux, "dupath", "request:plant", args)
	if msg, _ := out["error"].(string); code != http.StatusConflict || !strings.Contains(msg, `already served by trigger "plant"`) {
		t.Fatalf("second on the same path: HTTP %d %v, want 409 naming plant", code, out)
	}
	// A trigger named like the path but scheduled does not hold the path.
	if code, out := createTrigger(t, mux, "sched", "every:1h", args); code != http.StatusCreated {
		t.Fatalf("scheduled: HTTP %d %v", code, out)
	}
	if code, out := createTrigger(t, mux, "other", "request:sched", args); code != http.StatusCreated {
		t.Fatalf("path named like a scheduled trigger: HTTP %d %v", code, out)
	}
}

// enable and disable take the trigger's name from the query, as InfluxDB 3
// sends it, or from a JSON body; a body that disagrees with the query is
// refused rather than one of them chosen.
func TestEnableTakesTheNameFromQueryOrBody(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	if code, out := createTrigger(t, mux, "tg", "request:tg", "measurement=m,field=y,model=v/m"); code != http.StatusCreated {
		t.Fatalf("create: HTTP %d %v", code, out)
	}
	const base = "/api/v3/configure/processing_engine_trigger"
	for _, tc := range []struct {
		name, path, body string
		code             int
		disabled         bool
	}{
		{"body disables", base + "/disable", `{"trigger_name":"tg","db":"x"}`, http.StatusOK, true},
		{"query enables", base + "/enable?trigger_name=tg", ``, http.StatusOK, false},
		{"both agree", base + "/disable?trigger_name=tg", `{"trigger_name":"tg"}`, http.StatusOK, true},
		{"both disagree", base + "/enable?trigger_name=tg", `{"trigger_name":"other"}`, http.StatusBadRequest, true},
		{"unknown body field", base + "/enable", `{"name":"tg"}`, http.StatusBadRequest, true},
		{"no name", base + "/enable", `{}`, http.StatusBadRequest, true},
		{"body names a missing trigger", base + "/enable", `{"trigger_name":"nosuch"}`, http.StatusNotFound, true},
	} {
		code, out := do(t, mux, http.MethodPost, tc.path, tc.body)
		if code != tc.code {
			t.Fatalf("%s: HTTP %d %v, want %d", tc.name, code, out, tc.code)
		}
		tr, err := s.Store().Get(t.Context(), "tg")
		if err != nil || tr.Disabled != tc.disabled {
			t.Fatalf("%s: trigger %+v %v, want disabled=%v", tc.name, tr, err, tc.disabled)
		}
	}
}
