package scheduler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The audit's CSRF: a page on another site posted a text/plain body that
// created a trigger, and a form that disabled one. A browser sends either
// without asking first; state-changing requests now must be JSON, which it
// cannot send cross-site without a preflight regressd never grants.
func TestCrossSiteFormsChangeNothing(t *testing.T) {
	s, mux, _ := newTestScheduler(t)
	ctx := context.Background()
	if code, out := createTrigger(t, mux, "kept", "request:kept", "measurement=m,field=y,model=v/m"); code != http.StatusCreated {
		t.Fatalf("create as JSON: HTTP %d %v", code, out)
	}
	const base = "/api/v3/configure/processing_engine_trigger"
	cases := []struct{ name, path, ctype, body string }{
		{"text/plain create", base, "text/plain", `{"trigger_name":"planted","trigger_specification":"request:planted","trigger_arguments":"measurement=m,field=y,model=v/m"}`},
		{"form disable", base + "/disable?trigger_name=kept", "application/x-www-form-urlencoded", "x=1"},
		{"multipart disable", base + "/disable?trigger_name=kept", "multipart/form-data; boundary=b", "--b--"},
		{"no type run", "/api/v3/engine/kept", "", `{}`},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body))
		req.Header.Set("Origin", "http://evil.example")
		req.Header.Set(HeaderServiceKey, "k")
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnsupportedMediaType || !strings.Contains(rec.Body.String(), "application/json") {
			t.Errorf("%s: HTTP %d %s, want 415 naming application/json", tc.name, rec.Code, rec.Body)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v3/engine/kept", strings.NewReader("\x1f\x8b"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set(HeaderServiceKey, "k")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnsupportedMediaType || !strings.Contains(rec.Body.String(), "Content-Encoding: gzip") {
		t.Errorf("gzip run: HTTP %d %s, want 415 naming the coding", rec.Code, rec.Body)
	}
	if _, err := s.Store().Get(ctx, "planted"); err == nil {
		t.Error("a text/plain POST planted a trigger")
	}
	if tr, err := s.Store().Get(ctx, "kept"); err != nil || tr.Disabled {
		t.Errorf("the kept trigger: %+v %v, want it enabled", tr, err)
	}
}
