package scheduler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Input PostgreSQL or a NATS header cannot take is refused at the edge,
// each with its reason: a NUL byte or invalid UTF-8 in any argument (raw
// or percent-escaped in a tag), too many feature fields.
func TestArgsRefuseWhatTheStoresCannotTake(t *testing.T) {
	many := make([]string, MaxFeatureFields+1)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
	}
	cases := map[string]string{
		"measurement=m\x00,field=y,feature_fields=a,model=v/m":                      "NUL",
		"measurement=m,field=y,feature_fields=a,model=v/m,tags=host:a%00b":          "NUL",
		"measurement=m,field=y,feature_fields=a,model=v/m,tags=host:\xff":           "invalid UTF-8",
		"measurement=m,field=y,model=v/m,feature_fields=" + strings.Join(many, " "): "over the limit",
	}
	for in, want := range cases {
		m, err := SplitArgs(in)
		if err == nil {
			_, err = ResolveArgs(m, false, nil)
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.80q: %v, want an error naming %q", in, err, want)
		}
	}
}

// A window reaching before year 1 was a server error (the job's JSON
// cannot hold it); it is a 400 with its reason.
func TestWindowBeforeYearOneIsRefused(t *testing.T) {
	end := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC)
	if _, _, err := ResolveWindow(nil, &end, 30*24*time.Hour, time.Now()); err == nil || !strings.Contains(err.Error(), "years 1 to 9999") {
		t.Fatalf("window before year 1: %v", err)
	}
	_, mux, _ := newTestScheduler(t)
	createTrigger(t, mux, "w", "request:w", "measurement=m,field=y,feature_fields=a,model=v/m")
	code, out := do(t, mux, http.MethodPost, "/api/v3/engine/w", `{"end_time":"0001-01-02T00:00:00Z"}`)
	if code != http.StatusBadRequest {
		t.Fatalf("HTTP %d %v, want 400", code, out)
	}
}

// Without a key the engine endpoint answers 401 whether the trigger exists
// or not (no probing of trigger names), and a key past the limit is 400.
func TestEngineAsksForTheKeyFirst(t *testing.T) {
	_, mux, _ := newTestScheduler(t)
	createTrigger(t, mux, "real", "request:real", "measurement=m,field=y,feature_fields=a,model=v/m")
	for _, name := range []string{"real", "nope"} {
		req := httptest.NewRequest(http.MethodPost, "/api/v3/engine/"+name, strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s without a key: HTTP %d %s, want 401", name, rec.Code, rec.Body)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/api/v3/engine/real", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderServiceKey, strings.Repeat("k", MaxServiceKey+1))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "over the limit") {
		t.Errorf("a %d-byte key: HTTP %d %s, want 400", MaxServiceKey+1, rec.Code, rec.Body)
	}
}
