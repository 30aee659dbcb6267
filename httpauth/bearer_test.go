package httpauth

import (
	"net/http/httptest"
	"testing"
)

// "bearer" is "Bearer": the scheme is case-insensitive (RFC 9110).
func TestToken(t *testing.T) {
	for h, want := range map[string]string{"Bearer tok": "tok", "bearer tok": "tok", "BEARER  tok": "tok", "Basic tok": "", "Bearertok": "", "": ""} {
		if got, ok := Token(h); got != want || ok != (want != "") {
			t.Errorf("Token(%q) = %q %v, want %q", h, got, ok, want)
		}
	}
}

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		tokens []string
		header string
		want   bool
	}{
		{nil, "", true},
		{[]string{"a", "b"}, "Bearer b", true},
		{[]string{"a", "b"}, "bearer a", true},
		{[]string{"a"}, "Bearer ab", false},
		{[]string{"a"}, "Basic a", false},
		{[]string{"a"}, "", false},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if got := Allowed(tc.tokens, r); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v, want %v", tc.tokens, tc.header, got, tc.want)
		}
	}
}
