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

func TestUTF8(t *testing.T) {
	for _, tc := range []struct {
		body string
		base int64
		want string // "" for valid
	}{
		{`{"measurement":"weather"}`, 0, ""},
		{`{"measurement":"Température ΔT"}`, 0, ""},
		{"{\"measurement\":\"wea\xffther\"}", 0, "0xff at offset 19"},
		{"\xc3", 10, "0xc3 at offset 10"},
		{"ok\xed\xa0\x80", 0, "0xed at offset 2"}, // a surrogate half
	} {
		err := UTF8([]byte(tc.body), tc.base)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("%q: %v, want an error with %q", tc.body, err, tc.want)
		}
	}
}

func TestTruncateCutsOnARuneBoundary(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: the cut steps back to its start
		{"éé", 1, "…"},
	} {
		if got := Truncate(c.in, c.n); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
