package scheduler

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/bus/bustest"
	"github.com/regressd/regressd/schemas"
)

var bodySeeds = []string{
	`{}`,
	``,
	`null`,
	`[]`,
	`{"start_time": "2026-01-01T00:00:00Z", "end_time": "2026-01-02T00:00:00Z"}`,
	`{"start_time": "2026-01-02", "end_time": "2026-01-01"}`,
	`{"end_time": "2026-01-01T00:00:00", "window": "7d"}`,
	`{"measurement": "m", "field": "y", "feature_fields": ["a", "b"], "tags": {"host": "a"}}`,
	`{"feature_fields": "a b", "tags": "host:a zone:b", "dry_run": true}`,
	`{"dry_run": "yes"}`,
	`{"start_time": 1234}`,
	`{"api_key": "secret"}`,
	`{"colour": "red", "window": null}`,
	`{"tags": {"a b": "c"}, "feature_fields": ["a b"]}`,
	`{"measurement": "we\"ird;DROP TABLE x;--", "field": "tëmp", "feature_fields": ["温度"]}`,
	`{"start_time": "9999-12-31T23:59:59Z", "window": "1000000w"}`,
	`{"start_time": "0001-01-01T00:00:00Z"}`,
	`{"window": "0.0000001s"}`,
	`{"a":` + strings.Repeat(`{"a":`, 50),
}

func FuzzParseEngineBody(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, pinned bool) {
		targs := map[string]string{"model": "v/m"}
		if pinned {
			targs["measurement"], targs["field"] = "pinned", "y"
		}
		req, err := ParseEngineBody(body, targs)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error with no message")
			}
			return
		}
		if pinned && (req.Args["measurement"] != "pinned" || req.Args["field"] != "y") {
			t.Fatalf("the body overrode pinned arguments: %v", req.Args)
		}
		args, err := ResolveArgs(req.Args, false, nil)
		if err != nil {
			return
		}
		start, end, err := ResolveWindow(req.Start, req.End, time.Duration(args.Window), now)
		if err == nil && !start.Before(end) {
			t.Fatalf("window [%s, %s) accepted", start, end)
		}
	})
}

// FuzzEngineEndpoint sends fuzzed bodies to the real engine endpoint (on a
// real JetStream): bad input is a 4xx, never a 5xx; good input queues a job.
func FuzzEngineEndpoint(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	srv := bustest.New(f)
	sealer, err := schemas.NewSealer([]byte("fuzz-secret-0123456789"))
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(context.Background(), srv.JS, Config{Sealer: sealer, WaitTimeout: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	args, _ := SplitArgs("model=v/m,feature_fields=x1")
	if err := s.Store().Create(context.Background(), Trigger{Name: "fz", Spec: "request:fz", Args: args}); err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/api/v3/engine/fz", bytes.NewReader(body))
		req.Header.Set(HeaderServiceKey, "k")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for body %q: %s", rec.Code, body, rec.Body)
		}
		if !strings.Contains(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("HTTP %d answered %q, not JSON", rec.Code, rec.Header().Get("Content-Type"))
		}
	})
}
