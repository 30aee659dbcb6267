package scheduler

import (
	"net/http"
	"strings"
	"testing"
)

// The audit's 5xx on bad input are 4xx with a message: a trigger name or
// a task id that is no bucket key ("*", "a.b"); a create body naming a key
// twice is refused rather than the last one taken; a huge name is echoed
// cut short.
func TestBadNamesAre4xx(t *testing.T) {
	_, mux, _ := newTestScheduler(t)
	createTrigger(t, mux, "real", "request:real", "measurement=m,field=y,feature_fields=a,model=v/m")
	const base = "/api/v3/configure/processing_engine_trigger"
	for _, path := range []string{
		base + "/enable?trigger_name=*", base + "/disable?trigger_name=a.b", base + "/enable?trigger_name=%3E",
	} {
		if code, out := do(t, mux, http.MethodPost, path, ""); code != http.StatusNotFound {
			t.Errorf("POST %s: HTTP %d %v, want 404", path, code, out)
		}
	}
	for _, path := range []string{"/api/v3/engine/real/tasks/*", "/api/v3/engine/real/tasks/a.b", "/api/v3/engine/real/tasks/%3E"} {
		if code, out := do(t, mux, http.MethodGet, path, ""); code != http.StatusNotFound {
			t.Errorf("GET %s: HTTP %d %v, want 404", path, code, out)
		}
	}
	body := `{"trigger_name":"dup","trigger_specification":"request:dup","trigger_specification":"every:1h","trigger_arguments":"measurement=m,field=y,feature_fields=a,model=v/m"}`
	if code, out := do(t, mux, http.MethodPost, base, body); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), "given twice") {
		t.Errorf("duplicate body key: HTTP %d %v, want 400", code, out)
	}
	body = `{"trigger_name":"dup2","trigger_specification":"request:dup2","trigger_arguments":{"model":"v/m","model":"v/other","measurement":"m","field":"y","feature_fields":"a"}}`
	if code, out := do(t, mux, http.MethodPost, base, body); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), "given twice") {
		t.Errorf("duplicate argument key: HTTP %d %v, want 400", code, out)
	}
	huge := strings.Repeat("m", 200<<10)
	code, out := createTrigger(t, mux, "big", "request:big", "measurement=m,field=y,feature_fields=a,model=v/"+huge)
	if msg, _ := out["error"].(string); code != http.StatusBadRequest || len(msg) > 2*maxEcho+1000 {
		t.Errorf("200 KB model name: HTTP %d, message of %d bytes, want 400 with the name cut short", code, len(msg))
	}
}
