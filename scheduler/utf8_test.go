package scheduler

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// Invalid UTF-8 anywhere in a body is a 400 at the engine endpoint and the
// admin API, never a value encoding/json quietly turned into U+FFFD.
func TestBodiesMustBeUTF8(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	args, _ := SplitArgs("model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "open", Spec: "request:open", Args: args}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		"{\"measurement\":\"wea\xffther\",\"field\":\"y\",\"feature_fields\":\"a\"}",
		"{\"measurement\":\"m\",\"field\":\"y\",\"feature_fields\":\"a\",\"tags\":{\"host\":\"\xc3\"}}",
		"{\"measurement\":\"m\",\"field\":\"y\",\"feature_fields\":\"a\",\"dry_run\":true,\"t\xe9\":1}",
	} {
		code, out := do(t, mux, http.MethodPost, "/api/v3/engine/open", body)
		if msg, _ := out["message"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "not valid UTF-8") {
			t.Errorf("engine %q: HTTP %d %v, want 400 naming UTF-8", body, code, out)
		}
	}
	body := "{\"trigger_name\":\"u\",\"trigger_specification\":\"request:u\",\"trigger_arguments\":\"measurement=m,field=y,feature_fields=a,model=v/m,tags=host:\xff\"}"
	code, out := do(t, mux, http.MethodPost, "/api/v3/configure/processing_engine_trigger", body)
	if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "not valid UTF-8") {
		t.Errorf("admin: HTTP %d %v, want 400 naming UTF-8", code, out)
	}
}

// A body that is not JSON, or not an object, says so plainly: the offset
// where it stops being JSON, no Go type names.
func TestEngineBodyNotJSON(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	args, _ := SplitArgs("model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "open", Spec: "request:open", Args: args}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"dry_run":NaN}`, "the body is not valid JSON: invalid character 'N' looking for beginning of value (at offset 12)"},
		{`[1]`, "the body must be a JSON object, got an array"},
		{`null`, "the body must be a JSON object, got null"},
		{`"x"`, "the body must be a JSON object, got a string"},
	} {
		code, out := do(t, mux, http.MethodPost, "/api/v3/engine/open", tc.body)
		msg, _ := out["message"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) || strings.Contains(msg, "map[") {
			t.Errorf("%s: HTTP %d %q, want 400 saying %q", tc.body, code, msg, tc.want)
		}
	}
}
