package httpjson

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, http.StatusCreated, map[string]string{"message": "<key> missing"}, "")
	if rec.Code != http.StatusCreated || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if got, want := rec.Body.String(), `{"message":"<key> missing"}`+"\n"; got != want {
		t.Fatalf("body %q, want %q", got, want)
	}
	if got := rec.Header().Get("Content-Length"); got != "28" {
		t.Fatalf("Content-Length %q, want 28", got)
	}
}

func TestWriteUnencodable(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(rec, http.StatusOK, math.NaN(), "  ")
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"code":"internal"`) {
		t.Fatalf("status %d body %q, want a 500 with code internal", rec.Code, rec.Body.String())
	}
}
