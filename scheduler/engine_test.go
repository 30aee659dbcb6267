package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

// newTestScheduler starts a scheduler on a real JetStream, its routes on a
// mux, with no producer or writer behind it: a published task stays queued.
func newTestScheduler(t *testing.T) (*Scheduler, *http.ServeMux, *bustest.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return newWaitingScheduler(t, ctx, time.Millisecond)
}

// newWaitingScheduler is newTestScheduler with engine calls waiting up to
// wait.
func newWaitingScheduler(t *testing.T, ctx context.Context, wait time.Duration) (*Scheduler, *http.ServeMux, *bustest.Server) {
	t.Helper()
	srv := bustest.New(t)
	sealer, err := schemas.NewSealer([]byte("test-secret-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, srv.JS, Config{Sealer: sealer, WaitTimeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	return s, mux, srv
}

// do sends a request to mux and decodes the JSON answer.
func do(t *testing.T, mux *http.ServeMux, method, url, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, url, bytes.NewReader([]byte(body)))
	req.Header.Set(HeaderServiceKey, "k")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: HTTP %d, not JSON: %q", method, url, rec.Code, rec.Body)
	}
	return rec.Code, out
}

// A task the engine endpoint accepted is running from the start, before
// any writer has published a summary: the poll URL of the 202 answers it.
func TestAcceptedTaskIsKnownAtOnce(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	args, _ := SplitArgs("measurement=m,field=y,feature_fields=a,model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "plant", Spec: "request:plant", Args: args}); err != nil {
		t.Fatal(err)
	}
	code, out := do(t, mux, http.MethodPost, "/api/v3/engine/plant", `{}`)
	if code != http.StatusAccepted {
		t.Fatalf("POST: HTTP %d %v, want 202", code, out)
	}
	msg, _ := out["message"].(string)
	_, poll, ok := strings.Cut(msg, "poll GET ")
	if !ok || out["task_id"] == "" {
		t.Fatalf("202 names no poll URL: %v", out)
	}
	code, out = do(t, mux, http.MethodGet, poll, "")
	if code != http.StatusOK || out["status"] != string(schemas.StatusRunning) || out["task_id"] == nil {
		t.Fatalf("GET %s: HTTP %d %v, want 200 running", poll, code, out)
	}
	if code, out := do(t, mux, http.MethodGet, "/api/v3/engine/plant/tasks/t_never", ""); code != http.StatusNotFound {
		t.Fatalf("a never-seen task: HTTP %d %v, want 404", code, out)
	}
}

// A trigger whose path is not its name: its tasks answer under the path the
// caller posted to (the poll URL of the 202) and under its name.
func TestTaskPolledUnderPathOrName(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	args, _ := SplitArgs("measurement=m,field=y,feature_fields=a,model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "named", Spec: "request:hook", Args: args}); err != nil {
		t.Fatal(err)
	}
	code, out := do(t, mux, http.MethodPost, "/api/v3/engine/hook", `{}`)
	task, _ := out["task_id"].(string)
	if code != http.StatusAccepted || !strings.Contains(out["message"].(string), "/api/v3/engine/hook/tasks/"+task) {
		t.Fatalf("POST: HTTP %d %v, want 202 naming the path", code, out)
	}
	for _, base := range []string{"hook", "named"} {
		if code, out := do(t, mux, http.MethodGet, "/api/v3/engine/"+base+"/tasks/"+task, ""); code != http.StatusOK {
			t.Errorf("GET under %s: HTTP %d %v, want 200", base, code, out)
		}
	}
	if code, _ := do(t, mux, http.MethodGet, "/api/v3/engine/nohook/tasks/"+task, ""); code != http.StatusNotFound {
		t.Errorf("GET under an unknown path: HTTP %d, want 404", code)
	}
}

// A key given twice in the body is refused, naming it, as duplicate trigger
// arguments and tag keys are; a refusal before any task exists has no task id.
func TestEngineBodyDuplicateKeys(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	args, _ := SplitArgs("model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "open", Spec: "request:open", Args: args}); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ body, want string }{
		{`{"measurement": "m", "field": "y", "feature_fields": "a", "tags": "host:a", "tags": "host:b"}`, `body key "tags" given twice`},
		{`{"measurement": "m", "field": "y", "feature_fields": "a", "tags": {"host": "a", "host": "b"}}`, `tags: key "host" given twice`},
		{`{"dry_run": true, "dry_run": false, "window": "1d", "window": "2d"}`, `body key "dry_run" given twice`},
	}
	for _, tc := range cases {
		code, out := do(t, mux, http.MethodPost, "/api/v3/engine/open", tc.body)
		msg, _ := out["message"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: HTTP %d %v, want 400 saying %q", tc.body, code, out, tc.want)
		}
		if _, ok := out["task_id"]; ok {
			t.Errorf("%s: a refused request names a task: %v", tc.body, out)
		}
	}
}

// An engine call still waiting when the scheduler shuts down answers 202
// with its task id at once, instead of holding the caller until the server
// drops the connection.
func TestWaitingCallAnswersOnShutdown(t *testing.T) {
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	s, mux, _ := newWaitingScheduler(t, ctx, time.Hour)
	bustest.Run(t, ctx, s.Run) // Run owns the scheduler's life
	args, _ := SplitArgs("measurement=m,field=y,feature_fields=a,model=v/m")
	if err := s.Store().Create(context.Background(), Trigger{Name: "plant", Spec: "request:plant", Args: args}); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(300*time.Millisecond, shutdown)
	began := time.Now()
	code, out := do(t, mux, http.MethodPost, "/api/v3/engine/plant", `{}`)
	if msg, _ := out["message"].(string); code != http.StatusAccepted || out["task_id"] == nil || !strings.Contains(msg, "shutting down") {
		t.Fatalf("HTTP %d %v, want 202 with the task id and why", code, out)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("answered after %v", d)
	}
}
