// Package httpauth holds regressd's own request authorization: the Bearer
// tokens of REGRESSD_AUTH_TOKENS, checked the same way by every server
// that needs them (the admin and engine API, /ui/, /metrics).
package httpauth

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Token returns the token of an Authorization header, its scheme matched
// case-insensitively (RFC 9110: "bearer" is "Bearer").
func Token(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(tok, " "), true
}

// Allowed reports whether r may pass: no tokens are set, or r carries one
// of them (compared in constant time).
func Allowed(tokens []string, r *http.Request) bool {
	if len(tokens) == 0 {
		return true
	}
	tok, ok := Token(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	for _, want := range tokens {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
			return true
		}
	}
	return false
}

// Message is the 401 answer's message.
const Message = "regressd request authorization required: send Authorization: Bearer <token>"
